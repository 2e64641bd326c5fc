/* mcpshim-shim v1 native -- the compiled shim `mcpshim install --native` builds, one per
 * command, with this install's values in "config.h" (written beside this file at install
 * time: every value a C string literal of octal escapes, so no byte of a path can end it).
 *
 * It writes the record the sh shim (shims/shim.sh) writes for the same exec, byte for byte,
 * in one O_APPEND write(), then execve()s the pinned target with the caller's argv and
 * environment untouched. It takes only the sh shim's common path; on every other path (an
 * argument that may hold a credential, a shell parent's first child, a record too large for
 * one write, no procfs, the first exec of a boot, a log that is missing or not a plain file
 * of the user's) it execs the sh shim installed beside it, which then does exactly what it
 * does on its own, with the same $0. Nothing in the environment is read but the values the
 * record holds (PATH, MCPSHIM_SESSION).
 *
 * No libc: raw system calls (x86_64 and aarch64 Linux), a static position-independent binary
 * with no relocations, so no dynamic loader runs (LD_PRELOAD and LD_LIBRARY_PATH mean
 * nothing to it) and start-up costs little more than the execve itself. Every buffer is
 * bounded and every copy checked against its bound: a record that would not fit is the sh
 * shim's to write.
 */

#include "config.h"

typedef unsigned long usize;
typedef long isize;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;
typedef long long i64;

#if defined(__x86_64__)
#define NR_read 0
#define NR_write 1
#define NR_close 3
#define NR_rt_sigaction 13
#define NR_mmap 9
#define NR_getpid 39
#define NR_execve 59
#define NR_getcwd 79
#define NR_chdir 80
#define NR_geteuid 107
#define NR_getppid 110
#define NR_exit_group 231
#define NR_openat 257
#define NR_statx 332
#define NR_clock_gettime 228
#define NR_mprotect 10
#define R_RELATIVE 8

static isize sys6(long n, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	isize ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

#ifndef MCPSHIM_HOSTED
__asm__(".text\n"
	".global _start\n"
	".type _start,@function\n"
	"_start:\n"
	"	xor %rbp, %rbp\n"
	"	mov %rsp, %rdi\n"
	"	and $-16, %rsp\n"
	"	call mcpshim_entry\n"
	"	hlt\n");
#endif

#elif defined(__aarch64__)
#define NR_getcwd 17
#define NR_chdir 49
#define NR_openat 56
#define NR_close 57
#define NR_read 63
#define NR_write 64
#define NR_exit_group 94
#define NR_rt_sigaction 134
#define NR_getpid 172
#define NR_getppid 173
#define NR_geteuid 175
#define NR_execve 221
#define NR_mmap 222
#define NR_statx 291
#define NR_clock_gettime 113
#define NR_mprotect 226
#define R_RELATIVE 1027

static isize sys6(long n, long a, long b, long c, long d, long e, long f)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;
	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory", "cc");
	return x0;
}

#ifndef MCPSHIM_HOSTED
__asm__(".text\n"
	".global _start\n"
	".type _start,%function\n"
	"_start:\n"
	"	mov x29, #0\n"
	"	mov x30, #0\n"
	"	mov x0, sp\n"
	"	bl mcpshim_entry\n"
	"	brk #0\n");
#endif

#else
#error "mcpshim's native shim is for x86_64 and aarch64 Linux (install falls back to the sh shim)"
#endif

#define sys1(n, a) sys6((n), (long)(a), 0, 0, 0, 0, 0)
#define sys2(n, a, b) sys6((n), (long)(a), (long)(b), 0, 0, 0, 0)
#define sys3(n, a, b, c) sys6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define sys4(n, a, b, c, d) sys6((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define sys5(n, a, b, c, d, e) sys6((n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

#define AT_FDCWD (-100)
#define AT_EMPTY_PATH 0x1000
#define O_RDONLY 0
#define O_WRONLY 1
#define O_NOCTTY 0400
#define O_APPEND 02000
#define O_NONBLOCK 04000
#if defined(__aarch64__)
#define O_NOFOLLOW 0100000
#else
#define O_NOFOLLOW 0400000
#endif
#define O_CLOEXEC 02000000
#define EINTR 4
#define ENOENT 2
#define ENOTDIR 20
#define SIGXFSZ 25
#define SIG_IGN ((void *)1)
#define STATX_BASIC 0x7ffU
#define S_IFMT 0170000
#define S_IFREG 0100000
#define S_IFDIR 0040000
#define CLOCK_BOOTTIME 7
#define AT_RANDOM 25
#define AT_EXECFN 31
#define PROT_RW 3
#define MAP_PRIVATE_ANON 0x22

struct statx_ts {
	i64 tv_sec;
	u32 tv_nsec;
	int pad;
};

struct statx_buf {
	u32 mask, blksize;
	u64 attributes;
	u32 nlink, uid, gid;
	u16 mode, pad1;
	u64 ino, size, blocks, attributes_mask;
	struct statx_ts atime, btime, ctime, mtime;
	u32 rdev_major, rdev_minor, dev_major, dev_minor;
	u64 spare[14];
};

struct ksigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	unsigned long mask;
};

/* ---- the few library functions gcc may call on its own, and a stack guard ---- */

#ifndef MCPSHIM_HOSTED /* (MCPSHIM_HOSTED: linked with a libc, for benchmarks/shim_overhead.py) */

void *memcpy(void *d, const void *s, usize n)
{
	unsigned char *a = d;
	const unsigned char *b = s;
	while (n--)
		*a++ = *b++;
	return d;
}

void *memset(void *d, int c, usize n)
{
	unsigned char *a = d;
	while (n--)
		*a++ = (unsigned char)c;
	return d;
}

void *memmove(void *d, const void *s, usize n)
{
	unsigned char *a = d;
	const unsigned char *b = s;
	if (a < b) {
		while (n--)
			*a++ = *b++;
	} else {
		while (n--)
			a[n] = b[n];
	}
	return d;
}

int memcmp(const void *x, const void *y, usize n)
{
	const unsigned char *a = x, *b = y;
	for (; n; n--, a++, b++)
		if (*a != *b)
			return *a - *b;
	return 0;
}

unsigned long __stack_chk_guard;

__attribute__((noreturn)) void __stack_chk_fail(void)
{
	static const char msg[] = "mcpshim: native shim: stack smashing detected\n";
	sys3(NR_write, 2, msg, sizeof msg - 1);
	for (;;)
		sys1(NR_exit_group, 127);
}
#endif

/* the ownership marker `mcpshim install` looks for before it replaces or removes the file */
__attribute__((used, section(".mcpshim"))) static const char marker[] =
	"\n# mcpshim-shim v1 native\n" MARKER_INFO;

/* ---- small helpers ---- */

static usize slen(const char *s)
{
	usize n = 0;
	while (s[n])
		n++;
	return n;
}

static int starts(const char *s, const char *p, usize n)
{
	for (usize i = 0; i < n; i++)
		if (s[i] != p[i])
			return 0;
	return 1;
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int is_ifs(char c)
{
	return c == ' ' || c == '\t' || c == '\n';
}

/* A bounded buffer: every put checks the room left; one that would not fit marks it full. */
struct buf {
	char *p;
	usize n, cap;
	int full;
};

static void put(struct buf *b, const char *s, usize n)
{
	if (b->full || n > b->cap - b->n) {
		b->full = 1;
		return;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

static void puts_(struct buf *b, const char *s)
{
	put(b, s, slen(s));
}

static void putu(struct buf *b, u64 v)
{
	char d[24];
	usize i = sizeof d;
	do {
		d[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put(b, d + i, sizeof d - i);
}

/* A field: \0= then its bytes. */
static void field(struct buf *b, const char *s, usize n)
{
	put(b, "\0=", 2);
	put(b, s, n);
}

/* Reads a small file (at most cap - 1 bytes, NUL-terminated); its length, or -1. */
static isize slurp(const char *path, char *dst, usize cap)
{
	int fd = (int)sys4(NR_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NOCTTY, 0);
	usize n = 0;
	if (fd < 0)
		return -1;
	/* procfs hands a small file over in one read; one that fills the buffer is the sh
	 * shim's to read (the callers check) */
	for (;;) {
		isize r = sys3(NR_read, fd, dst, cap - 1);
		if (r == -EINTR)
			continue;
		if (r < 0) {
			sys1(NR_close, fd);
			return -1;
		}
		n = (usize)r;
		break;
	}
	sys1(NR_close, fd);
	dst[n] = 0;
	return (isize)n;
}

/* `read -r VAR`: the first line, without leading and trailing blanks (IFS whitespace). */
static void first_line(char *s, usize n, const char **out, usize *outn)
{
	usize i = 0, e;
	while (i < n && s[i] != '\n')
		i++;
	e = i;
	i = 0;
	while (i < e && is_ifs(s[i]))
		i++;
	while (e > i && is_ifs(s[e - 1]))
		e--;
	*out = s + i;
	*outn = e - i;
}

static int stat_at(const char *path, struct statx_buf *st, int flags)
{
	return sys5(NR_statx, AT_FDCWD, path, flags, STATX_BASIC, st) == 0;
}

/* A path under a directory, NUL-terminated, into a bounded buffer; 0 when it would not fit. */
static int join(char *dst, usize cap, const char *dir, usize dn, const char *a, usize an,
		const char *b, usize bn)
{
	struct buf o = { dst, 0, cap - 1, 0 };
	put(&o, dir, dn);
	put(&o, a, an);
	put(&o, b, bn);
	if (o.full)
		return 0;
	dst[o.n] = 0;
	return 1;
}

/* ---- the trigger patterns: `case " $* " in TRIGGERS)` of shims/shim.sh ----
 *
 * TRIGGER_PROGRAM (config.h) holds each pattern as items: 0xff is `*`, 0xfe ends a pattern,
 * any other byte k is "one byte of set k", a 32-byte bitmap in TRIGGER_SETS. */

static int in_set(unsigned char set, unsigned char c)
{
	return (TRIGGER_SETS[set * 32 + (c >> 3)] >> (c & 7)) & 1;
}

/* Whether s matches the pattern at p (the classic one-star backtracking: linear in practice,
 * at most length(s) * length(pattern) steps). */
static int glob(const unsigned char *p, const unsigned char *s, usize n)
{
	usize si = 0, star_si = 0;
	const unsigned char *star_p = 0;
	for (;;) {
		if (*p == 0xff) {
			star_p = ++p;
			star_si = si;
			continue;
		}
		if (*p == 0xfe) {
			if (si == n)
				return 1;
		} else if (si < n && in_set(*p, s[si])) {
			p++;
			si++;
			continue;
		}
		if (!star_p || star_si >= n)
			return 0;
		p = star_p;
		si = ++star_si;
	}
}

static int triggered(const unsigned char *s, usize n)
{
	const unsigned char *p = (const unsigned char *)TRIGGER_PROGRAM;
	const unsigned char *end = p + sizeof TRIGGER_PROGRAM - 1;
	int at = 0, url = 0;
	while (p < end) {
		if (glob(p, s, n))
			return 1;
		while (*p != 0xfe)
			p++;
		p++;
	}
	/* an @ and a scheme separator (the `*@*)` case of shims/shim.sh) */
	for (usize i = 0; i < n; i++) {
		if (s[i] == '@')
			at = 1;
		if (i + 2 < n && s[i] == ':' && s[i + 1] == '/' && s[i + 2] == '/')
			url = 1;
	}
	return at && url;
}

/* ---- the environment ---- */

/* The value dash would see for NAME: the last entry of that name (dash imports them in
 * order). *dup says there were more than one (then the sh shim decides). */
static const char *env_value(char **envp, const char *name, usize nl, int *dup)
{
	const char *v = 0;
	for (; *envp; envp++) {
		if (starts(*envp, name, nl) && (*envp)[nl] == '=') {
			if (v)
				*dup = 1;
			v = *envp + nl + 1;
		}
	}
	return v;
}

/* ---- the exits ---- */

static char **g_argv;
static char **g_envp;
static const char *g_execfn;
static int g_argc;

static __attribute__((noreturn)) void die(int code)
{
	for (;;)
		sys1(NR_exit_group, code);
}

static const char *errtext(isize e)
{
	switch (-e) {
	case 2:
		return "not found";
	case 13:
		return "Permission denied";
	case 8:
		return "Exec format error";
	case 7:
		return "Argument list too long";
	case 12:
		return "Out of memory";
	case 20:
		return "Not a directory";
	case 26:
		return "Text file busy";
	case 40:
		return "Too many levels of symbolic links";
	default:
		return "cannot be executed";
	}
}

/* What the sh shim's `exec` does when it fails: a line, then 127 (not found) or 126. */
static __attribute__((noreturn)) void exec_failed(const char *what, isize e)
{
	char line[512 + sizeof TARGET];
	struct buf o = { line, 0, sizeof line, 0 };
	puts_(&o, "mcpshim: cannot run ");
	puts_(&o, what);
	puts_(&o, ": ");
	puts_(&o, errtext(e));
	if (o.full)
		o.n = o.cap - 1;
	line[o.n++] = '\n';
	sys3(NR_write, 2, line, o.n);
	die(e == -ENOENT || e == -ENOTDIR ? 127 : 126);
}

static __attribute__((noreturn)) void run_target(void);

/* The sh shim gone: the record cannot be written; --on-log-failure decides. */
static __attribute__((noreturn)) void no_fallback(void)
{
	char line[512 + sizeof FALLBACK + sizeof TARGET];
	struct buf o = { line, 0, sizeof line, 0 };
	if (ON_FAIL_REFUSE) {
		puts_(&o, "mcpshim: refusing to run ");
		put(&o, TARGET, sizeof TARGET - 1);
		puts_(&o, ": its sh shim ");
		put(&o, FALLBACK, sizeof FALLBACK - 1);
		puts_(&o, " cannot be read\n");
	} else {
		puts_(&o, "mcpshim: warning: the sh shim ");
		put(&o, FALLBACK, sizeof FALLBACK - 1);
		puts_(&o, " cannot be read; running ");
		put(&o, TARGET, sizeof TARGET - 1);
		puts_(&o, " unlogged\n");
	}
	if (!o.full)
		sys3(NR_write, 2, line, o.n);
	if (ON_FAIL_REFUSE)
		die(126);
	run_target();
}

/* The sh shim, on every path but the common one: INTERP [-p] -c FALLBACK_CMD $0 ARGS...,
 * which sources the sh shim installed beside this one with $0 and the arguments as the
 * caller gave them. */
static __attribute__((noreturn)) void fallback(void)
{
	usize n = (usize)g_argc + 6;
	char **v = (char **)sys6(NR_mmap, 0, (long)(n * sizeof(char *)), PROT_RW,
				 MAP_PRIVATE_ANON, -1, 0);
	usize k = 0;
	isize r;
	struct statx_buf st;
	if (!stat_at(FALLBACK, &st, 0) || (st.mode & S_IFMT) != S_IFREG)
		no_fallback();
	if ((isize)v < 0 && (isize)v > -4096)
		exec_failed(INTERP, (isize)v);
	v[k++] = (char *)INTERP;
	if (INTERP_BASH)
		v[k++] = (char *)"-p";
	v[k++] = (char *)"-c";
	v[k++] = (char *)FALLBACK_CMD;
	v[k++] = (char *)(g_execfn ? g_execfn : (g_argc > 0 ? g_argv[0] : NAME));
	for (int i = 1; i < g_argc; i++)
		v[k++] = g_argv[i];
	v[k] = 0;
	r = sys3(NR_execve, INTERP, v, g_envp);
	exec_failed(INTERP, r);
}

static __attribute__((noreturn)) void run_target(void)
{
	char *none[2] = { (char *)NAME, 0 };
	isize r = sys3(NR_execve, TARGET, g_argc > 0 ? g_argv : none, g_envp);
	exec_failed(TARGET, r);
}

/* The line the sh shim prints when the log cannot be written (and the exit for refuse). */
static void log_failure(const char *why)
{
	char line[1024 + 2 * sizeof LOGDIR + sizeof TARGET];
	struct buf o = { line, 0, sizeof line - 1, 0 };
	struct statx_buf st;
	if (!stat_at(LOGDIR, &st, 0) || (st.mode & S_IFMT) != S_IFDIR)
		why = "no such directory";
	if (ON_FAIL_REFUSE) {
		puts_(&o, "mcpshim: refusing to run ");
		put(&o, TARGET, sizeof TARGET - 1);
		puts_(&o, ": the exec log ");
		put(&o, LOGDIR, sizeof LOGDIR - 1);
		puts_(&o, " cannot be written (");
		puts_(&o, why);
		puts_(&o, ")\n");
	} else {
		puts_(&o, "mcpshim: warning: the exec log ");
		put(&o, LOGDIR, sizeof LOGDIR - 1);
		puts_(&o, " cannot be written (");
		puts_(&o, why);
		puts_(&o, "); running ");
		put(&o, TARGET, sizeof TARGET - 1);
		puts_(&o, " unlogged\n");
	}
	if (!o.full)
		sys3(NR_write, 2, line, o.n);
	if (ON_FAIL_REFUSE)
		die(126);
}

/* ---- the record ---- */

/* Room for the largest record the sh shim writes in one write on its common path: its size
 * estimate is at most 4000 and leaves out the values below, each bounded here. */
#define REC_CAP (4096 + 2048 + sizeof NAME + sizeof TARGET)
static char g_rec[REC_CAP];
static char g_joined[4096 + 4];

#define SMALL 256

static __attribute__((noinline)) void shim(char **argv, int argc, char **envp)
{
	char up_raw[SMALL], boot_raw[SMALL], stat_raw[1024], cwd[4096 + 1];
	char path[4096 + 64], path2[64];
	const char *up, *boot, *line, *ppid_s = 0, *start_s = 0;
	usize up_n, boot_n, line_n, ppid_n = 0, start_n = 0, cwd_n;
	char ppid_buf[24], pid_buf[24];
	struct buf pb = { ppid_buf, 0, sizeof ppid_buf, 0 };
	struct buf pidb = { pid_buf, 0, sizeof pid_buf, 0 };
	struct statx_buf st, st2;
	isize n;
	int dup = 0;
	const char *envpath, *session, *arg0;
	usize envpath_n, session_n, arg0_n, args_n = 0, nargs, z;
	struct buf rec = { g_rec, 0, sizeof g_rec, 0 };
	struct buf joined = { g_joined, 0, sizeof g_joined, 0 };
	struct ksigaction ign = { SIG_IGN, 0, 0, 0 }, old;
	int fd, xfsz;
	const char *bad = 0;
	u64 pid;

	/* The uptime as /proc/uptime prints it ("%lu.%02lu" of CLOCK_BOOTTIME, the clock it
	 * reads, time namespaces included): one system call instead of a procfs file. Then
	 * the boot id and /proc/self/stat: no procfs is the sh shim's. */
	{
		struct { long sec, nsec; } ts;
		struct buf ub = { up_raw, 0, sizeof up_raw, 0 };
		if (sys2(NR_clock_gettime, CLOCK_BOOTTIME, &ts) != 0 || ts.sec < 0)
			fallback();
		putu(&ub, (u64)ts.sec);
		put(&ub, ".", 1);
		put(&ub, (const char[]){ (char)('0' + ts.nsec / 100000000 % 10),
					 (char)('0' + ts.nsec / 10000000 % 10) }, 2);
		up = up_raw;
		up_n = ub.n;
	}
	n = slurp("/proc/sys/kernel/random/boot_id", boot_raw, sizeof boot_raw);
	if (n < 0)
		fallback();
	first_line(boot_raw, (usize)n, &boot, &boot_n);
	if (boot_n == 0 || (usize)n >= sizeof boot_raw - 1)
		fallback();
	for (usize i = 0; i < boot_n; i++)
		if (boot[i] == '/')
			fallback();
	n = slurp("/proc/self/stat", stat_raw, sizeof stat_raw);
	if (n < 0 || (usize)n >= sizeof stat_raw - 1)
		fallback();
	first_line(stat_raw, (usize)n, &line, &line_n);
	/* cd -P . && cwd=$PWD: anything but an absolute path is the sh shim's to explain */
	if (sys1(NR_chdir, ".") != 0)
		fallback();
	n = sys2(NR_getcwd, cwd, sizeof cwd);
	if (n <= 1 || cwd[0] != '/')
		fallback();
	cwd_n = slen(cwd);

	/* The fields after the comm: ppid (2nd) and start (20th), unless the line holds ") "
	 * twice; else ppid is $PPID and the start is unknown (shims/shim.sh). */
	pid = (u64)sys1(NR_getpid, 0);
	putu(&pidb, pid);
	{
		usize first = 0, count = 0;
		for (usize i = 0; i + 1 < line_n; i++) {
			if (line[i] == ')' && line[i + 1] == ' ') {
				if (!count)
					first = i;
				count++;
			}
		}
		if (count == 1 && line_n > pidb.n + 2 && starts(line, pid_buf, pidb.n) &&
		    line[pidb.n] == ' ' && line[pidb.n + 1] == '(' && first >= pidb.n + 2) {
			const char *f[21];
			usize fl[21], nf = 0, i = first + 2;
			while (i < line_n && nf < 21) {
				while (i < line_n && is_ifs(line[i]))
					i++;
				if (i >= line_n)
					break;
				f[nf] = line + i;
				while (i < line_n && !is_ifs(line[i]))
					i++;
				fl[nf] = (usize)(line + i - f[nf]);
				nf++;
			}
			/* $1, $2 and ${20} of the line's own fields: a line with fewer than 20 (a
			 * newline in the comm cut it short) gets none, as in the sh shim, where they
			 * would be the caller's arguments */
			const char *v1 = nf > 19 ? f[0] : 0;
			const char *v2 = nf > 19 ? f[1] : 0;
			const char *v20 = nf > 19 ? f[19] : 0;
			usize l1 = v1 ? fl[0] : 0, l2 = v2 ? fl[1] : 0, l20 = v20 ? fl[19] : 0;
			if (v1 && l1 == 1 &&
			    ((v1[0] >= 'A' && v1[0] <= 'Z') || (v1[0] >= 'a' && v1[0] <= 'z')) && v20) {
				int ok = 1; /* case $2${20} in *[!0-9]*) */
				for (usize j = 0; j < l2; j++)
					ok &= is_digit(v2[j]);
				for (usize j = 0; j < l20; j++)
					ok &= is_digit(v20[j]);
				if (ok) {
					ppid_s = v2 ? v2 : "";
					ppid_n = l2;
					start_s = v20;
					start_n = l20;
				}
			}
		}
	}
	if (!ppid_s) {
		putu(&pb, (u64)sys1(NR_getppid, 0));
		ppid_s = ppid_buf;
		ppid_n = pb.n;
	}
	if (ppid_n > 20 || start_n > 20)
		fallback();

	/* the first exec of a boot with no anchor for it: the sh shim makes one */
	if (!join(path, sizeof path, LOGDIR "/boot/", sizeof LOGDIR + 5, boot, boot_n, "", 0) ||
	    !stat_at(path, &st, 0))
		fallback();

	/* A shell parent whose line no shimmed child kept yet: the sh shim keeps it. (Here a
	 * marker counts as fresh only when no reading of `-ot` calls it older, and none of `-nt`
	 * newer than this process's own /proc entry: one dated ahead was planted for pids to
	 * come, and the sh shim's library judges it by its content.) */
	if (join(path2, sizeof path2, "/proc/", 6, ppid_s, ppid_n, "/exe", 4) &&
	    stat_at(path2, &st, 0)) {
		const char *sh = SHELLS;
		while (*sh) {
			usize sl = slen(sh);
			if (stat_at(sh, &st2, 0) && st2.ino == st.ino && st2.dev_major == st.dev_major &&
			    st2.dev_minor == st.dev_minor) {
				struct statx_buf m, p;
				struct buf mk = { path, 0, sizeof path - 1, 0 };
				put(&mk, LOGDIR "/parents/", sizeof LOGDIR + 8);
				put(&mk, boot, boot_n);
				put(&mk, ".", 1);
				put(&mk, ppid_s, ppid_n);
				if (mk.full)
					fallback();
				path[mk.n] = 0;
				path2[6 + ppid_n] = 0; /* /proc/PPID */
				if (stat_at(path, &m, 0)) {
					if (stat_at(path2, &p, 0) &&
					    (m.mtime.tv_sec < p.mtime.tv_sec ||
					     (m.mtime.tv_sec == p.mtime.tv_sec &&
					      m.mtime.tv_nsec < p.mtime.tv_nsec)))
						fallback();
					if (!stat_at("/proc/self", &p, 0) ||
					    m.mtime.tv_sec > p.mtime.tv_sec ||
					    (m.mtime.tv_sec == p.mtime.tv_sec &&
					     m.mtime.tv_nsec > p.mtime.tv_nsec))
						fallback();
				} else {
					fallback();
				}
				break;
			}
			sh += sl + 1;
		}
	}

	/* what the record holds from the environment; a PATH the shell would make up itself,
	 * or a name given twice, is the sh shim's */
	envpath = env_value(envp, "PATH", 4, &dup);
	session = env_value(envp, "MCPSHIM_SESSION", 15, &dup);
	if (!envpath || dup)
		fallback();
	envpath_n = slen(envpath);
	session_n = session ? slen(session) : 0;
	arg0 = g_execfn;
	if (!arg0)
		fallback();
	arg0_n = slen(arg0);

	/* The sh shim's size estimate (shims/shim.sh): over 4000 it spills the record. */
	for (int i = 1; i < argc; i++)
		args_n += slen(argv[i]);
	nargs = argc > 0 ? (usize)argc - 1 : 0;
	z = cwd_n + envpath_n + arg0_n + session_n + args_n + (nargs ? nargs - 1 : 0) + 7 * nargs +
	    300;
	if (z > 4000)
		fallback();
	if (INTERP_BASH) { /* bash's line-buffered printf: a newline spills the record */
		const char *vals[4] = { cwd, envpath, arg0, session ? session : "" };
		for (int j = 0; j < 4; j++)
			for (const char *c = vals[j]; *c; c++)
				if (*c == '\n')
					fallback();
		for (int i = 1; i < argc; i++)
			for (const char *c = argv[i]; *c; c++)
				if (*c == '\n')
					fallback();
	}

	/* One look at " $* ": an argument that may hold a credential is the scrubber's. */
	put(&joined, " ", 1);
	for (int i = 1; i < argc; i++) {
		if (i > 1)
			put(&joined, " ", 1);
		puts_(&joined, argv[i]);
	}
	put(&joined, " ", 1);
	if (joined.full || triggered((const unsigned char *)g_joined, joined.n))
		fallback();

	/* Only into a regular file of this user's that is no symlink (no FIFO, no device): the
	 * open never follows a link or blocks, the checks are of what was opened. */
	fd = (int)sys4(NR_openat, AT_FDCWD, LOGDIR "/exec.log",
		       O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
	if (fd < 0)
		fallback();
	if (sys5(NR_statx, fd, "", AT_EMPTY_PATH, STATX_BASIC, &st) != 0 ||
	    (st.mode & S_IFMT) != S_IFREG || st.uid != (u32)sys1(NR_geteuid, 0)) {
		sys1(NR_close, fd);
		fallback();
	}

	/* \0R\0=1\0=exec\0=btime\0=uptime\0=boot\0=pid\0=ppid\0=start\0=pstart\0=cwd\0=shim
	 * \0=target\0=$0\0=session\0=PATH\0=redactions\0=parent line\0=argc\0=arg...\0\n */
	put(&rec, "\0R", 2);
	field(&rec, "1", 1);
	field(&rec, "exec", 4);
	field(&rec, "", 0);
	field(&rec, up, up_n);
	field(&rec, boot, boot_n);
	field(&rec, pid_buf, pidb.n);
	field(&rec, ppid_s, ppid_n);
	field(&rec, start_s ? start_s : "", start_n);
	field(&rec, "", 0);
	field(&rec, cwd, cwd_n);
	field(&rec, NAME, sizeof NAME - 1);
	field(&rec, TARGET, sizeof TARGET - 1);
	field(&rec, arg0, arg0_n);
	field(&rec, session ? session : "", session_n);
	field(&rec, envpath, envpath_n);
	field(&rec, "", 0);
	field(&rec, "", 0);
	put(&rec, "\0=", 2);
	putu(&rec, (u64)nargs);
	for (int i = 1; i < argc; i++)
		field(&rec, argv[i], slen(argv[i]));
	put(&rec, "\0\n", 2);
	if (rec.full) {
		sys1(NR_close, fd);
		fallback();
	}

	/* A file-size limit fails the write, it does not kill the shim (the caller's
	 * disposition is back before the exec). */
	xfsz = sys4(NR_rt_sigaction, SIGXFSZ, &ign, &old, 8) == 0;
	{
		usize off = 0;
		while (off < rec.n) {
			isize w = sys3(NR_write, fd, g_rec + off, rec.n - off);
			if (w == -EINTR)
				continue;
			if (w <= 0) {
				bad = "exec.log cannot be written";
				break;
			}
			off += (usize)w;
		}
	}
	if (xfsz)
		sys4(NR_rt_sigaction, SIGXFSZ, &old, 0, 8);
	sys1(NR_close, fd);
	if (bad)
		log_failure(bad);
}

#ifdef MCPSHIM_MATCH_TEST
/* Built only by the test suite (never installed): one line per argument, 1 when the trigger
 * patterns match it, so the matcher can be held against dash's own `case`. */
static __attribute__((noinline)) void match_test(char **argv, int argc)
{
	for (int i = 1; i < argc; i++) {
		const char *r = triggered((const unsigned char *)argv[i], slen(argv[i])) ? "1\n" : "0\n";
		sys3(NR_write, 1, r, 2);
	}
	die(0);
}
#endif

/* argc, argv, envp and the auxiliary vector as the kernel laid them on the stack; the stack
 * guard from AT_RANDOM before any guarded function runs. */
#ifndef MCPSHIM_HOSTED
/* A static PIE has no loader to apply its relocations (aarch64's compiler reaches some data
 * through the GOT): the R_*_RELATIVE ones, the only kind it has, are applied here, first of
 * all, then the RELRO range is made read-only, as a loader would. */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));
extern const long _DYNAMIC[] __attribute__((visibility("hidden")));

static __attribute__((no_stack_protector, always_inline)) inline void relocate(void)
{
	unsigned long base = (unsigned long)__ehdr_start, rela = 0, relasz = 0, ent = 24;
	const unsigned char *eh = (const unsigned char *)__ehdr_start;
	unsigned long phoff = *(const unsigned long *)(eh + 32);
	unsigned short phent = *(const unsigned short *)(eh + 54);
	unsigned short phnum = *(const unsigned short *)(eh + 56);
	for (const long *d = _DYNAMIC; d[0] != 0; d += 2) {
		if (d[0] == 7) /* DT_RELA */
			rela = (unsigned long)d[1];
		else if (d[0] == 8) /* DT_RELASZ */
			relasz = (unsigned long)d[1];
		else if (d[0] == 9) /* DT_RELAENT */
			ent = (unsigned long)d[1];
	}
	for (unsigned long off = 0; rela && ent && off + ent <= relasz; off += ent) {
		const unsigned long *r = (const unsigned long *)(base + rela + off);
		if ((r[1] & 0xffffffffUL) == R_RELATIVE)
			*(unsigned long *)(base + r[0]) = base + r[2];
	}
	for (unsigned short i = 0; i < phnum; i++) {
		const unsigned char *ph = eh + phoff + (unsigned long)i * phent;
		if (*(const unsigned int *)ph == 0x6474e552U) { /* PT_GNU_RELRO */
			unsigned long va = base + *(const unsigned long *)(ph + 16);
			unsigned long end = va + *(const unsigned long *)(ph + 40);
			va &= ~4095UL;
			end &= ~4095UL; /* only whole pages: the rest shares a page with .data */
			if (end > va)
				sys3(NR_mprotect, va, end - va, 1);
		}
	}
}

__attribute__((noreturn, no_stack_protector, used)) void mcpshim_entry(long *sp)
{
	int argc = (int)sp[0];
	char **argv = (char **)(sp + 1);
	char **envp = argv + argc + 1;
	char **e = envp;
	unsigned long *aux;
	relocate();
	while (*e)
		e++;
	for (aux = (unsigned long *)(e + 1); aux[0]; aux += 2) {
		if (aux[0] == AT_RANDOM)
			memcpy(&__stack_chk_guard, (void *)aux[1], sizeof __stack_chk_guard);
		else if (aux[0] == AT_EXECFN)
			g_execfn = (const char *)aux[1];
	}
	g_argv = argv;
	g_envp = envp;
	g_argc = argc;
#ifdef MCPSHIM_MATCH_TEST
	match_test(argv, argc);
#endif
	shim(argv, argc, envp);
	run_target();
}
#endif

#ifdef MCPSHIM_HOSTED
/* The same program started by a libc (static or dynamic), only to measure what that start
 * costs (benchmarks/shim_overhead.py --options); never installed. */
extern unsigned long getauxval(unsigned long);

int main(int argc, char **argv, char **envp)
{
	g_execfn = (const char *)getauxval(AT_EXECFN);
	g_argv = argv;
	g_envp = envp;
	g_argc = argc;
	shim(argv, argc, envp);
	run_target();
}
#endif
