"""The vendor table of redact_rules: tokens known by the prefix their vendor issues them
with (the vendors gitleaks and detect-secrets watch for), each a text rule."""

from __future__ import annotations

import string

from mcpshim.log.redact_shapes import ALNUM, Before, Head, TextRule

__all__ = ["VENDORS"]

_TOKEN_BODY = ALNUM + "_-"
_HEX = string.digits + "abcdef"
_UPPER = string.ascii_uppercase + string.digits
_B64 = ALNUM + "+/="


def _vendor(
    name: str,
    heads: str | tuple[str, ...],
    anchor: str,
    tails: tuple[str, ...] = ("",),
    min_len: int = 20,
    body: str = _TOKEN_BODY,
    before: Before = "word",
    scope: tuple[str, ...] = (),
) -> TextRule:
    globs = (heads,) if isinstance(heads, str) else heads
    return TextRule(
        name, anchor, tuple(Head(h, before) for h in globs), tails, body=body, min_len=min_len,
        scope=scope,
    )  # fmt: skip


_B62 = "[" + ALNUM + "]"
_DIGIT = "[" + string.digits + "]"
# fmt: off
#: Tokens known by their shape, each as its vendor documents it (the prefix it issues them
#: with, then the token's alphabet and least length). The marker replaces what follows the
#: anchor: a prefix's last characters may stay in the record (`sk_live_[REDACTED:...]`),
#: the secret never does.
VENDORS: tuple[TextRule, ...] = (
    _vendor("stripe-key", "[rs]", "k", ("_live_", "_test_"), 20, ALNUM),  # sk_live_, rk_test_
    _vendor("stripe-key", "whse", "c", ("_",), 24, ALNUM),  # webhook signing secret
    _vendor("sendgrid-key", "SG", ".", min_len=60, body=_TOKEN_BODY + "."),  # SG.x{22}.y{43}
    _vendor("huggingface-token", "hf", "_", min_len=30, body=ALNUM),
    _vendor("huggingface-token", "api_or", "g", ("_",), 30, ALNUM),  # api_org_
    _vendor("digitalocean-token", "do[opr]_", "v", ("1_",), 64, _HEX),  # dop_v1_, doo_, dor_
    _vendor("vault-token", "hv[sbr]", ".", min_len=24),  # hvs., hvb., hvr.
    _vendor("shopify-token", "shp[acps][acst]", "_", min_len=32, body=ALNUM),  # shpat_, shpss_
    _vendor("pypi-token", "pypi", "-", ("AgENdGVzdC5weXBpLm9yZw", "AgEIcHlwaS5vcmc"), 50),
    _vendor("slack-webhook", ("services", "workflows"), "/", ("T",), 30, ALNUM + "/",
            scope=("hooks.slack.com",)),
    _vendor("slack-token", "xapp", "-", min_len=20, body=ALNUM + "-"),
    _vendor("telegram-bot-token", _DIGIT * 5, ":", ("AA",), 30, before="any"),
    *(_vendor("discord-token", "[MNO]" + _B62 * n, ".", min_len=34, body=_TOKEN_BODY + ".")
      for n in (23, 24, 25)),
    _vendor("discord-webhook", "webhooks", "/", min_len=60, body=_TOKEN_BODY + "/",
            scope=("discord",)),
    _vendor("age-secret-key", "AGE-SECRET-KE", "Y", ("-1",), 50, _UPPER, before="any"),
    _vendor("mailgun-key", "key", "-", min_len=32, body=_HEX),
    _vendor("twilio-key", "S", "K", min_len=32, body=_HEX),
    _vendor("twilio-auth", "AC" + ("[" + _HEX + "]") * 32, ":", min_len=32, body=_HEX),
    _vendor("gitlab-token", ("glptt", "gldt", "glrt", "glsoat", "glcbt", "glimt", "glft",
                             "glagent"), "-"),
    _vendor("grafana-token", ("glc", "glsa"), "_", min_len=32),
    _vendor("linear-key", "lin_", "a", ("pi_",), 40, ALNUM),
    _vendor("doppler-token", "dp.[pcs]", "t", (".",), 40, ALNUM),
    _vendor("sentry-token", "sntry[su]", "_", min_len=40, body=_B64 + "_"),
    _vendor("postman-key", "PMAK", "-", min_len=50, body=ALNUM + "-"),
    _vendor("databricks-token", "dap", "i", min_len=32, body=_HEX),
    _vendor("newrelic-key", ("NRAK", "NRII"), "-", min_len=27, body=_UPPER),
    _vendor("rubygems-key", "rubygems", "_", min_len=48, body=_HEX),
    _vendor("planetscale-token", "pscale", "_", min_len=32),
    _vendor("pulumi-token", "pul", "-", min_len=40, body=_HEX),
    _vendor("heroku-key", "HRKU", "-", min_len=40),
    _vendor("square-token", "sq0[ac][st]p", "-", min_len=22),
    _vendor("dynatrace-token", "dt0c01", ".", min_len=80, body=ALNUM + "."),
    _vendor("atlassian-token", "ATATT3", "x", min_len=50, body=_TOKEN_BODY + "="),
    _vendor("bitbucket-token", "A", "T", ("BB",), 30, _TOKEN_BODY + "="),
    _vendor("figma-token", "figd", "_", min_len=40),
    _vendor("notion-token", "ntn", "_", min_len=40, body=ALNUM),
    _vendor("flyio-token", "fo1", "_", min_len=40),
    _vendor("supabase-key", "sbp", "_", min_len=40, body=_HEX),
    _vendor("supabase-key", "sb_secre", "t", ("_",), 20),
    _vendor("groq-key", "gsk", "_", min_len=50, body=ALNUM),
    _vendor("xai-key", "xai", "-", min_len=60, body=ALNUM),
    _vendor("replicate-token", "r8", "_", min_len=30, body=ALNUM),
    _vendor("perplexity-key", "pplx", "-", min_len=40, body=ALNUM),
    _vendor("mapbox-token", "sk", ".", ("eyJ",), 60, _TOKEN_BODY + "."),
    _vendor("dropbox-token", "sl", ".", min_len=100),
    _vendor("onepassword-token", "ops", "_", ("eyJ",), 50, _TOKEN_BODY + "."),
    _vendor("tailscale-key", "tskey", "-", min_len=30, body=ALNUM + "-"),
    _vendor("terraform-token", "atlasv1", ".", min_len=60, before="any"),
    _vendor("docker-token", "dckr", "_", min_len=25),  # dckr_pat_, dckr_oat_
    _vendor("buildkite-token", "bkua", "_", min_len=40, body=_HEX),
    _vendor("circleci-token", "CCIPAT", "_", min_len=30, body=ALNUM + "_"),
    _vendor("shippo-token", "shippo", "_", min_len=40, body=ALNUM + "_"),
    _vendor("flutterwave-key", "FLWSEC", "K", min_len=30),
    _vendor("brevo-key", "xkeysib", "-", min_len=60, body=ALNUM + "-"),
    _vendor("google-oauth-secret", "GOCSPX", "-", min_len=24),
    _vendor("google-oauth-token", "ya29", ".", min_len=30, body=_TOKEN_BODY + "."),
    _vendor("azure-ad-secret", _DIGIT + "Q", "~", min_len=30, body=_TOKEN_BODY + "~.",
            before="any"),
    _vendor("jfrog-token", "AKC", "p", min_len=60, body=ALNUM),
    _vendor("infracost-key", "ico", "-", min_len=32, body=ALNUM),
    _vendor("prefect-key", "pnu", "_", min_len=36, body=ALNUM),
    _vendor("readme-key", "rdme", "_", min_len=60, body=ALNUM),
    _vendor("typeform-token", "tfp", "_", min_len=40, body=_TOKEN_BODY + "."),
    _vendor("scalingo-token", "tk-", "u", ("s-",), 40),
    _vendor("frameio-token", "fio-", "u", ("-",), 60, _TOKEN_BODY + "="),
    _vendor("duffel-token", "duffel", "_", min_len=43, body=_TOKEN_BODY + "="),
    _vendor("easypost-key", "EZ[AT]", "K", min_len=54, body=ALNUM),
    _vendor("adafruit-key", "aio", "_", min_len=28, body=ALNUM),
    _vendor("contentful-token", "CFPAT", "-", min_len=40),
    _vendor("harness-token", "pat", ".", min_len=60, body=_TOKEN_BODY + "."),
)
# fmt: on
