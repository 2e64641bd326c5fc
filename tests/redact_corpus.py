"""Credential shapes, and ordinary text that looks a little like them, for every writer.

A positive names the secrets that must not reach the log in any form; a negative has none,
and every writer must keep its arguments byte for byte. Each shape is a command and its
arguments, as a program would receive them (a composed `sh -c` line is one argument).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    name: str
    command: str
    args: tuple[str, ...]
    secrets: tuple[str, ...] = ()  # empty: a negative, kept as it is

    @property
    def negative(self) -> bool:
        return not self.secrets


GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
PAT = "github_pat_11ABCDEFG0" + "a_b" * 20
OPENAI = "sk-proj-" + "Ab3" * 16
ANTHROPIC = "sk-ant-api03-" + "Zz9_" * 20
SLACK = "xoxb-123456789012-1234567890123-" + "AbCd" * 6
AKIA = "AKIAIOSFODNN7EXAMPLE"
ASIA = "ASIAY34FZKBOKMUTVV7A"
GLPAT = "glpat-" + "a1B2c3D4e5F6g7H8i9J0"
NPM = "npm_" + "a" * 36
GOOGLE = "AIza" + "SyD-" * 9
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
PW = "hunter2-correct-horse"
BEARER = "abc.def-ghi_jkl123"
BASIC = "dXNlcjpwYXNzd29yZA=="
PEM_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7o"
PEM = (
    f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n{PEM_BODY[::-1]}\n-----END RSA PRIVATE KEY-----"
)
OPENSSH = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
    "-----END OPENSSH PRIVATE KEY-----"
)
SHA256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
SHA1 = "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"
UUID = "123e4567-e89b-12d3-a456-426614174000"

POSITIVE: tuple[Shape, ...] = (
    Shape("github classic token", "git", ("push", f"https://{GH}@github.com/o/r"), (GH[4:],)),
    Shape("github oauth tokens", "gh", ("gho_" + "x" * 36, "ghu_" + "Y" * 36), ("x" * 36,)),
    Shape("github fine-grained", "gh", ("auth", "login", "--with-token", PAT), (PAT[11:],)),
    Shape("openai key", "python3", ("tool.py", f"--model-key={OPENAI}"), (OPENAI[8:],)),
    Shape("anthropic key", "node", ("app.js", ANTHROPIC), (ANTHROPIC[13:],)),
    Shape("slack token", "curl", ("-d", f"token={SLACK}", "https://slack.com/api"), (SLACK[5:],)),
    Shape("aws access key id", "aws", ("--access-key", AKIA), (AKIA[4:],)),
    Shape("aws sts key id", "aws", (f"id={ASIA}",), (ASIA[4:],)),
    Shape("gitlab token", "glab", ("auth", GLPAT), (GLPAT[6:],)),
    Shape("npm token", "npm", (f"//registry.npmjs.org/:_authToken={NPM}",), (NPM[4:],)),
    Shape("google api key", "curl", (f"https://x.googleapis.com/v1?key={GOOGLE}",), (GOOGLE[4:],)),
    Shape("jwt", "curl", ("-H", f"X-Session: {JWT}"), (JWT[3:],)),
    Shape(
        "authorization bearer header",
        "curl",
        ("-H", f"Authorization: Bearer {BEARER}", "https://api.example"),
        (BEARER,),
    ),
    Shape("authorization lower case", "curl", ("-H", f"authorization: bearer {BEARER}"), (BEARER,)),
    Shape("authorization upper case", "curl", ("-H", f"AUTHORIZATION: BEARER {BEARER}"), (BEARER,)),
    Shape("bearer after a tab", "curl", ("-H", f"Authorization:\tBearer\t{BEARER}"), (BEARER,)),
    Shape("basic auth header", "wget", (f"--header=Authorization: Basic {BASIC}",), (BASIC,)),
    Shape("proxy authorization", "curl", ("-H", f"Proxy-Authorization: Basic {BASIC}"), (BASIC,)),
    Shape("url password", "psql", (f"postgres://app:{PW}@db.example:5432/app",), (PW,)),
    Shape(
        "url password with @", "git", ("clone", "https://u:p@ss@w0rd@h.example/r"), ("p@ss", "w0rd")
    ),
    Shape("url password with /", "git", ("clone", "https://u:pa/ss/wd@h.example/r"), ("pa/ss/wd",)),
    Shape("--password value", "tool", ("--password", PW, "run"), (PW,)),
    Shape("--password=value", "tool", (f"--password={PW}",), (PW,)),
    Shape("--PASSWORD=value", "tool", (f"--PASSWORD={PW}",), (PW,)),
    Shape("--pass=value", "openssl", ("enc", f"--pass={PW}"), (PW,)),
    Shape("--api-token=value", "tool", (f"--api-token={PW}",), (PW,)),
    Shape("--token value", "tool", ("--token", PW), (PW,)),
    Shape("--client-secret value", "az", ("login", "--client-secret", PW), (PW,)),
    Shape("--http-password=value", "wget", (f"--http-password={PW}", "https://x"), (PW,)),
    Shape("mysql -psecret", "mysql", ("-uroot", f"-p{PW}", "app"), (PW,)),
    Shape("mysql -p secret", "mysql", ("-u", "root", "-p", PW), (PW,)),
    Shape("mariadb-dump -psecret", "mariadb-dump", (f"-p{PW}", "app"), (PW,)),
    Shape("curl -u user:pw", "curl", ("-u", f"admin:{PW}", "https://x"), (PW,)),
    Shape("curl -uuser:pw", "curl", (f"-uadmin:{PW}", "https://x"), (PW,)),
    Shape("curl -su (flags combined)", "curl", ("-su", f"admin:{PW}", "https://x"), (PW,)),
    Shape("curl --user user:pw", "curl", ("--user", f"admin:{PW}"), (PW,)),
    Shape("curl --user=user:pw", "curl", (f"--user=admin:{PW}",), (PW,)),
    Shape("sshpass -p", "sshpass", ("-p", PW, "ssh", "-p", "22", "host"), (PW,)),
    Shape("redis-cli -a", "redis-cli", ("-h", "cache", "-a", PW, "PING"), (PW,)),
    Shape("mysql after docker exec", "docker", ("exec", "db", "mysql", f"-p{PW}"), (PW,)),
    Shape("NAME=value credential", "env", (f"GITHUB_TOKEN={PW}", "make"), (PW,)),
    Shape("DB_PASSWORD=value", "env", (f"DB_PASSWORD={PW}", "./run"), (PW,)),
    Shape("MYSQL_PWD=value", "env", (f"MYSQL_PWD={PW}", "mysql"), (PW,)),
    Shape("PGPASSWORD=value", "env", (f"PGPASSWORD={PW}", "psql"), (PW,)),
    Shape("camelCase apiKey=value", "tool", (f"apiKey={PW}",), (PW,)),
    Shape("pem private key", "tool", ("--key-data", PEM), (PEM_BODY, PEM_BODY[::-1])),
    Shape(
        "openssh private key",
        "ssh-add",
        (OPENSSH,),
        ("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",),
    ),
    Shape("x-api-key header", "curl", ("-H", f"X-Api-Key: {PW}"), (PW,)),
    Shape("x-api-key glued", "curl", ("-H", f"x-api-key:{PW}"), (PW,)),
    Shape("x-auth-token header", "curl", ("-H", f"X-Auth-Token: {PW}"), (PW,)),
    Shape("json token", "curl", ("-d", f'{{"token": "{PW}", "n": 1}}'), (PW,)),
    Shape("json apiKey", "curl", ("-d", f'{{"apiKey":"{PW}"}}'), (PW,)),
    Shape("json password", "curl", ("--data", f'{{"user":"a","password":"{PW}"}}'), (PW,)),
    Shape(
        "aws secret key bare",
        "aws",
        ("configure", "set", "aws_secret_access_key", AWS_SECRET),
        (AWS_SECRET,),
    ),
    Shape("aws secret key alone", "tool", (AWS_SECRET,), (AWS_SECRET,)),
    Shape(
        "AWS_SECRET_ACCESS_KEY=",
        "env",
        (f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", "aws"),
        (AWS_SECRET,),
    ),
    Shape(
        "aws secret key in a config line",
        "sh",
        ("-c", f"printf 'aws_secret_access_key = {AWS_SECRET}'"),
        (AWS_SECRET,),
    ),
    Shape("option in sh -c", "sh", ("-c", f"tool --password {PW} && echo ok"), (PW,)),
    Shape("--token= in sh -c", "bash", ("-c", f"tool --api-token={PW}; echo ok"), (PW,)),
    Shape("mysql in sh -c", "sh", ("-c", f"mysql -uroot -p{PW} app < dump.sql"), (PW,)),
    Shape("curl -u in sh -c", "sh", ("-c", f"curl -u admin:{PW} https://x"), (PW,)),
    Shape("env assignment in sh -c", "sh", ("-c", f"GITHUB_TOKEN={PW} make release"), (PW,)),
    Shape("query ?token=", "curl", (f"https://x.example/api?token={PW}&page=2",), (PW,)),
    Shape("query access_token", "wget", (f"https://x.example/?a=1&access_token={PW}",), (PW,)),
    Shape("java -Dpassword=", "java", (f"-Ddb.password={PW}", "-jar", "app.jar"), (PW,)),
)

NEGATIVE: tuple[Shape, ...] = (
    Shape("git log -p", "git", ("log", "-p", "--stat")),
    Shape("mkdir -p", "mkdir", ("-p", "x/y")),
    Shape("ssh -p 22", "ssh", ("-p", "22", "host", "uptime")),
    Shape("scp -P", "scp", ("-P", "2222", "a", "host:b")),
    Shape("git -c core.editor", "git", ("-c", "core.editor=vim", "commit")),
    Shape("key=value config", "tool", ("key=value", "name=x")),
    Shape("--tokenizer=bpe", "python3", ("train.py", "--tokenizer=bpe", "--tokens", "512")),
    Shape("sha256", "sha256sum", ("-c", SHA256)),
    Shape("sha1", "git", ("show", SHA1)),
    Shape("uuid", "tool", ("--id", UUID)),
    Shape("AWS_CA_BUNDLE path", "env", ("AWS_CA_BUNDLE=/etc/ssl/ca.pem", "aws", "s3", "ls")),
    Shape("a port, then @ in the path", "curl", ("https://example.com:8443/path@v1",)),
    Shape("scp-like git url", "git", ("clone", "git@github.com:org/repo.git")),
    Shape("ssh url with a user", "git", ("clone", "ssh://git@host:22/r.git")),
    Shape("look-alike words", "tool", ("task-list-abcdefghijklmnopqrstuvwxyz", "disk-usage")),
    Shape("short prefixes", "tool", ("ghp_short", "npm_config_cache", "sk-1")),
    Shape(
        "--password-file path", "tool", ("--password-file=/run/secrets/pw", "--token-file", "/t")
    ),
    Shape("--no-password", "psql", ("--no-password", "-h", "db", "app")),
    Shape("git --author", "git", ("commit", "--author=A U Thor <a@example.com>", "-m", "x")),
    Shape("bearer in prose", "echo", ("the bearer of bad news",)),
    Shape("paths and urls", "curl", ("-o", "/tmp/out", "https://example.com/a/b?page=2")),
    Shape("PWD and PATH", "env", ("PWD=/tmp", "GOPATH=/go", "PATH=/usr/bin", "make")),
    Shape("keyboard and hotkey", "tool", ("--keyboard=us", "hotkey=ctrl", "monkey=1")),
    Shape("plain sh -c", "sh", ("-c", "mkdir -p out && git log -p -1 && ssh -p 22 h true")),
)

CORPUS = POSITIVE + NEGATIVE
