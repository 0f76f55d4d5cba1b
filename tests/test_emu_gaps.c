/* emu_gaps: emulator behaviours a real kernel + ConnectX has and the emulator lacked.
 *
 *   rx_write_requests_live      sysfs hw_counters/rx_write_requests counts the RDMA WRITE request
 *                               packets the port accepted (k: mlx5 Q counter rx_write_requests,
 *                               "received WRITE requests for the associated QPs"): in-process
 *                               reads are live (open+read, lseek(0)+read, pread), another
 *                               process reads the file (rewritten within 10 ms)
 *   port_event_context_without_objects
 *                               PORT_ERR (10) / PORT_ACTIVE (9) reach the async fd of a context
 *                               that owns no CQ or QP (k: ib_dispatch_event -> the event handler
 *                               every uverbs file with an async event file registers)
 *   asan_preloaded_into_timeout coreutils' timeout with the ASan runtime and the emulator
 *                               preloaded starts and exits (it hung: libpcap's dependencies,
 *                               then a re-entrant initialisation) */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_mlx5.h"
#include "mlxd_roce.h"
#include "mlxd_uverbs.h"
#include "test_emu_kernel.h"

#define PAGE 4096u

struct rig {
    unsigned a, b;
    struct mlxd_nic *nic;
    struct mlxd_cq *cq;
    struct mlxd_qp *qp;
    struct mlxd_region *rw;
    uint8_t *mem;
    uint32_t qpn, psn;
    uint64_t rx0;
    char path[700];
};

static uint32_t ip4(const struct rig *s, unsigned host) { return 127u << 24 | s->a << 16 | s->b << 8 | host; }

static uint64_t rx_pkts(void)
{
    struct mlxd_emu_nic_stats st = { .sz = sizeof st };
    ck_assert_int_eq(mlxd_emu_nic_stats(0, &st), 0);
    return st.rx_pkts;
}

static void rig_up(struct rig *s)
{
    memset(s, 0, sizeof *s);
    unsigned v = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
    s->a = 1 + (v >> 8) % 250;
    s->b = (v >> 16) & 0xff;
    char spec[64];
    snprintf(spec, sizeof spec, "mlx5_0:127.%u.%u.1", s->a, s->b);
    ck_assert_int_eq(mlxd_emu_configure(spec), 0);
    snprintf(s->path, sizeof s->path, "%s/class/infiniband/mlx5_0/ports/1/hw_counters/rx_write_requests",
             mlxd_emu_sysfs_path());
    ck_assert_msg(mlxd_open("mlx5_0", NULL, &s->nic) == 0, "%s", mlxd_errmsg());
    s->mem = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(s->mem != MAP_FAILED);
    struct mlxd_region_opts ro = { .sz = sizeof ro,
                                   .access = MLXD_ACCESS_LOCAL_WRITE | MLXD_ACCESS_REMOTE_WRITE };
    ck_assert_int_eq(mlxd_region_register(s->nic, s->mem, 4 * PAGE, &ro, &s->rw), 0);
    ck_assert_int_eq(mlxd_cq_create(s->nic, 64, NULL, &s->cq), 0);
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_UC, .recv_depth = 16 };
    ck_assert_int_eq(mlxd_qp_create(s->cq, &qo, &s->qp), 0);
    struct mlxd_recv r = { .wr_id = 1 };
    for (int i = 0; i < 16; i++) ck_assert_int_eq(mlxd_qp_receive(s->qp, &r, 1), 1);
    struct mlxd_endpoint peer = { .qpn = 0x4242, .psn = 100 };
    peer.gid[10] = peer.gid[11] = 0xff;
    uint32_t pip = htonl(ip4(s, 2));
    memcpy(peer.gid + 12, &pip, 4);
    struct mlxd_connect_opts co = { .sz = sizeof co, .peer_access = MLXD_ACCESS_REMOTE_WRITE,
                                    .receive_only = true };
    ck_assert_msg(mlxd_qp_connect(s->qp, &peer, &co) == 0, "%s", mlxd_errmsg());
    struct mlxd_endpoint me;
    ck_assert_int_eq(mlxd_qp_endpoint(s->qp, &me), 0);
    s->qpn = me.qpn;
    s->psn = 100;
    s->rx0 = rx_pkts();
}

static void send_pkt(struct rig *s, unsigned from_host, struct mlxd_roce_pkt p, uint32_t len)
{
    static uint8_t pay[4096], buf[8192];
    memset(pay, 0xc3, sizeof pay);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(ip4(s, from_host)) };
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&src, sizeof src), 0);
    socklen_t sl = sizeof src;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&src, &sl), 0);
    struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(4791),
                               .sin_addr.s_addr = htonl(ip4(s, 1)) };
    p.src_ip = ip4(s, from_host);
    p.dst_ip = ip4(s, 1);
    p.src_port = ntohs(src.sin_port);
    ssize_t n = mlxd_roce_build(buf, sizeof buf, &p, pay, len);
    ck_assert_msg(n > 0, "build: %zd", n);
    ck_assert_int_eq(sendto(fd, buf + MLXD_ROCE_BTH_OFF, (size_t)n - MLXD_ROCE_BTH_OFF, 0,
                            (struct sockaddr *)&dst, sizeof dst), (ssize_t)n - MLXD_ROCE_BTH_OFF);
    close(fd);
}

static void wait_rx(struct rig *s, uint64_t count)
{
    for (int i = 0; i < 10000 && rx_pkts() - s->rx0 < count; i++) {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    ck_assert_uint_eq(rx_pkts() - s->rx0, count);
    struct timespec ts = { 0, 20000000 };   /* rx_pkts counts before dispatch: let it finish */
    nanosleep(&ts, NULL);
}

static struct mlxd_roce_pkt pkt(struct rig *s, uint8_t op, uint64_t va, uint32_t rkey, uint32_t len)
{
    struct mlxd_roce_pkt p = { .opcode = (uint8_t)(MLXD_ROCE_TRANSPORT_UC | op), .dest_qp = s->qpn,
                               .psn = s->psn++ & MLXD_ROCE_PSN_MASK, .reth_va = va,
                               .reth_rkey = rkey, .reth_len = len };
    return p;
}

/* open + read, as a reader that opens the file each time (mlxd_receiver_stats) */
static unsigned long long read_counter(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
    char b[64];
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    ck_assert_int_gt(n, 0);
    b[n] = 0;
    ck_assert_msg(b[n - 1] == '\n', "no newline: '%s'", b);
    return strtoull(b, NULL, 10);
}

/* what another process (no emulator) reads: cat of the file */
static unsigned long long cat_counter(const char *path)
{
    char cmd[800], b[64] = "";
    snprintf(cmd, sizeof cmd, "env -u LD_PRELOAD cat '%s'", path);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(b, 1, sizeof b - 1, p);
    pclose(p);
    b[n] = 0;
    return strtoull(b, NULL, 10);
}

START_TEST(rx_write_requests_live)
{
    struct rig s;
    rig_up(&s);
    uint64_t va = mlxd_region_remote(s.rw).addr;
    uint32_t key = mlxd_region_remote(s.rw).rkey, bad = key ^ 0x100;
    struct mlxd_port_info pi;
    ck_assert_int_eq(mlxd_port_info(s.nic, &pi), 0);
    uint32_t mtu = pi.active_mtu_bytes;
    ck_assert_uint_le(3 * mtu, 4 * PAGE);
    ck_assert_uint_eq(read_counter(s.path), 0);
    /* an fd held open, read again after lseek(0) (the sensor bridge's receiver does that) */
    int held = open(s.path, O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(held, 0);
    char b[64];
    ck_assert_int_eq(read(held, b, sizeof b), 2);
    ck_assert(!memcmp(b, "0\n", 2));
    ck_assert_int_eq(read(held, b, sizeof b), 0);           /* end of file */

    /* accepted: WRITE Only, FIRST+MIDDLE+LAST (3 packets), WRITE Only with immediate = 5 */
    send_pkt(&s, 2, pkt(&s, MLXD_ROCE_OP_WRITE_ONLY, va, key, 64), 64);
    send_pkt(&s, 2, pkt(&s, MLXD_ROCE_OP_WRITE_FIRST, va + PAGE, key, 3 * mtu), mtu);
    send_pkt(&s, 2, pkt(&s, MLXD_ROCE_OP_WRITE_MIDDLE, 0, 0, 0), mtu);
    send_pkt(&s, 2, pkt(&s, MLXD_ROCE_OP_WRITE_LAST, 0, 0, 0), mtu);
    struct mlxd_roce_pkt wi = pkt(&s, MLXD_ROCE_OP_WRITE_ONLY_IMM, va, key, 32);
    wi.imm = 7;
    send_pkt(&s, 2, wi, 32);
    /* not counted: a bad rkey (dropped on UC), a SEND, a WRITE from an address not connected */
    send_pkt(&s, 2, pkt(&s, MLXD_ROCE_OP_WRITE_ONLY, va, bad, 64), 64);
    send_pkt(&s, 2, pkt(&s, MLXD_ROCE_OP_SEND_ONLY, 0, 0, 0), 16);
    send_pkt(&s, 3, pkt(&s, MLXD_ROCE_OP_WRITE_ONLY, va, key, 64), 64);
    wait_rx(&s, 8);
    ck_assert_uint_eq(read_counter(s.path), 5);
    ck_assert_int_eq(lseek(held, 0, SEEK_SET), 0);
    ck_assert_int_eq(read(held, b, 1), 1);                  /* a snapshot taken at offset 0 ... */
    ck_assert_int_eq(b[0], '5');
    ck_assert_int_eq(read(held, b, sizeof b), 1);           /* ... continued */
    ck_assert_int_eq(b[0], '\n');
    ck_assert_int_eq(pread(held, b, sizeof b, 0), 2);
    ck_assert(!memcmp(b, "5\n", 2));
    close(held);
    /* another process reads the file itself: rewritten within 10 ms of the change */
    unsigned long long other = 0;
    for (int i = 0; i < 200 && (other = cat_counter(s.path)) != 5; i++) {
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    ck_assert_uint_eq(other, 5);
    ck_assert_int_eq(mlxd_close(s.nic), 0);
    ck_assert_uint_eq(mlxd_emu_live_total(), 0);
    ck_assert_uint_eq(read_counter(s.path), 5);             /* the count outlives the engine */
    ck_assert_uint_eq(cat_counter(s.path), 5);
    munmap(s.mem, 4 * PAGE);
}
END_TEST

static void expect_event(int afd, uint32_t type)
{
    struct pollfd p = { .fd = afd, .events = POLLIN };
    ck_assert_int_eq(poll(&p, 1, 2000), 1);
    struct ib_uverbs_async_event_desc d;
    ck_assert_int_eq(read(afd, &d, sizeof d), (ssize_t)sizeof d);
    ck_assert_uint_eq(d.event_type, type);
    ck_assert_uint_eq(d.element, 1);                        /* the port number */
    ck_assert_int_eq(poll(&p, 1, 0), 0);
}

START_TEST(port_event_context_without_objects)
{
    tk_unique_devices();
    /* context A: GET_CONTEXT + an async fd, nothing else */
    int fa = tk_open(0);
    ck_assert_int_ge(fa, 0);
    struct mlx5_ib_alloc_ucontext_resp r;
    ck_assert_int_eq(tk_get_context(fa, &r), 0);
    int afa = -1;
    ck_assert_int_eq(tk_async_alloc(fa, &afa), 0);
    /* context B on the same device with a CQ (what was delivered before) */
    struct tk_env e;
    tk_env_open(&e, 0);
    int afb = -1;
    ck_assert_int_eq(tk_async_alloc(e.fd, &afb), 0);
    /* context C on the other device: gets nothing */
    int fc = tk_open(1);
    ck_assert_int_eq(tk_get_context(fc, &r), 0);
    int afc = -1;
    ck_assert_int_eq(tk_async_alloc(fc, &afc), 0);
    ck_assert_int_eq(mlxd_emu_set_link(0, false), 0);
    expect_event(afa, 10);                                  /* IB_EVENT_PORT_ERR */
    expect_event(afb, 10);
    ck_assert_int_eq(mlxd_emu_set_link(0, true), 0);
    expect_event(afa, 9);                                   /* IB_EVENT_PORT_ACTIVE */
    expect_event(afb, 9);
    struct pollfd p = { .fd = afc, .events = POLLIN };
    ck_assert_int_eq(poll(&p, 1, 100), 0);
    close(afa); close(afb); close(afc);
    close(fa); close(e.fd); close(fc);
    ck_assert_uint_eq(mlxd_emu_live_total(), 0);
}
END_TEST

/* Runs argv with a time limit; returns the exit status, or -1 when it had to be killed. */
static int run_limited(char *const argv[], char *const envp[], int seconds)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int dn = open("/dev/null", O_WRONLY);
        if (dn >= 0) { dup2(dn, 1); dup2(dn, 2); }
        execve(argv[0], argv, envp);
        _exit(127);
    }
    int st;
    for (int i = 0; i < seconds * 100; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

START_TEST(asan_preloaded_into_timeout)
{
    char asan[512] = "";
    FILE *p = popen("gcc -print-file-name=libasan.so 2>/dev/null", "r");
    if (p) { if (!fgets(asan, sizeof asan, p)) asan[0] = 0; pclose(p); }
    asan[strcspn(asan, "\n")] = 0;
    if (!asan[0] || asan[0] != '/' || access(asan, R_OK) || access("/usr/bin/timeout", X_OK)) {
        fprintf(stderr, "emu_gaps: no libasan.so or /usr/bin/timeout: asan_preloaded_into_timeout skipped\n");
        return;
    }
    const char *build = getenv("MLXD_BUILD") ? getenv("MLXD_BUILD") : "build";
    const char *src = getenv("MLXD_SRC") ? getenv("MLXD_SRC") : ".";
    char emu[1024], pre[1600];
    snprintf(emu, sizeof emu, "%s/%s/lib/libmlx5direct-emu.so", src, build);
    ck_assert_msg(access(emu, R_OK) == 0, "%s missing", emu);
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s:%s", asan, emu);
    char *argv[] = { "/usr/bin/timeout", "5", "/bin/true", NULL };
    for (int on = 0; on < 2; on++) {
        char *envp[] = { pre, "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0",
                         on ? "MLXD_EMU=1" : "MLXD_EMU=0", "PATH=/usr/bin:/bin", NULL };
        int rc = run_limited(argv, envp, 20);
        ck_assert_msg(rc == 0, "timeout with libasan + the emulator preloaded (MLXD_EMU=%d): %s %d",
                      on, rc < 0 ? "hung, killed after 20 s" : "exit", rc);
    }
}
END_TEST


/* Stale sysfs trees (emu/kernel/sysfs_tree.c sweep_stale, docs/emulator.md "sysfs"): building a tree removes
 * the mlxd-emu.* trees in $TMPDIR whose .mlxd-owner names a process that is gone (an exited,
 * reaped child) or a pid whose start time differs (reuse); a live owner, a tree without the
 * marker and a symlink (and what it points to) stay. */
static void mk_tree(const char *dir, const char *name, const char *owner)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/%s/class", dir, name);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/%s/class/abi_version", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0444);
    ck_assert_int_ge(fd, 0);
    close(fd);
    if (!owner) return;
    snprintf(p, sizeof p, "%s/%s/.mlxd-owner", dir, name);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(owner, f);
    fclose(f);
}

static bool exists(const char *dir, const char *name)
{
    char p[1024];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return lstat(p, &st) == 0;
}

START_TEST(stale_trees_swept)
{
    char dir[] = "/tmp/mlxd-sweep.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) _exit(0);
    ck_assert_int_eq(waitpid(child, NULL, 0), child);          /* gone: ESRCH from now on */
    char owner[64];
    snprintf(owner, sizeof owner, "%ld 1\n", (long)child);
    mk_tree(dir, "mlxd-emu.dead", owner);
    snprintf(owner, sizeof owner, "%ld 0\n", (long)getppid());  /* alive; start time unknown */
    mk_tree(dir, "mlxd-emu.live", owner);
    snprintf(owner, sizeof owner, "%ld 1\n", (long)getppid());  /* alive, but started at another time */
    mk_tree(dir, "mlxd-emu.reused", owner);
    mk_tree(dir, "mlxd-emu.nomarker", NULL);
    snprintf(owner, sizeof owner, "%ld 1\n", (long)child);
    mk_tree(dir, "target", owner);
    char link[1024], target[1024];
    snprintf(link, sizeof link, "%s/mlxd-emu.link", dir);
    snprintf(target, sizeof target, "%s/target", dir);
    ck_assert_int_eq(symlink(target, link), 0);

    char *old = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
    setenv("TMPDIR", dir, 1);
    unsigned v = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
    char spec[64];
    snprintf(spec, sizeof spec, "mlx5_0:127.%u.%u.9", 1 + (v >> 8) % 250, (v >> 16) & 0xff);
    int rc = mlxd_emu_configure(spec);
    if (old) { setenv("TMPDIR", old, 1); free(old); } else unsetenv("TMPDIR");
    ck_assert_int_eq(rc, 0);
    const char *root = mlxd_emu_sysfs_path();
    ck_assert_msg(!strncmp(root, dir, strlen(dir)), "tree %s not under %s", root, dir);

    ck_assert_msg(!exists(dir, "mlxd-emu.dead"), "tree of an exited process kept");
    ck_assert_msg(!exists(dir, "mlxd-emu.reused"), "tree of a reused pid kept");
    ck_assert_msg(exists(dir, "mlxd-emu.live"), "tree of a live process removed");
    ck_assert_msg(exists(dir, "mlxd-emu.nomarker"), "tree without .mlxd-owner removed");
    ck_assert_msg(exists(dir, "mlxd-emu.link"), "symlink removed");
    ck_assert_msg(exists(dir, "target/class/abi_version"), "symlink followed");
    /* the new tree names this process */
    char p[1024];
    snprintf(p, sizeof p, "%s/.mlxd-owner", root);
    FILE *f = fopen(p, "r");
    ck_assert_ptr_nonnull(f);
    long pid = 0;
    unsigned long long start = 0;
    ck_assert_int_eq(fscanf(f, "%ld %llu", &pid, &start), 2);
    fclose(f);
    ck_assert_int_eq(pid, getpid());
    ck_assert(start > 0);
    snprintf(p, sizeof p, "rm -rf '%s'", dir);      /* this process's tree included: it ends here */
    ck_assert_int_eq(system(p), 0);
}
END_TEST

/* mlxd_emu_fail_method refuses a name that no emulated call has (its rule would never fire) and
 * "*" (that is mlxd_emu_fail_nth_call), with -EINVAL and no rule made; every name the emulator
 * checks is accepted: the ioctl methods and legacy commands of the uverbs ABI
 * (rdma/ib_user_ioctl_cmds.h, rdma/ib_user_verbs.h, rdma/mlx5_user_ioctl_cmds.h) it serves, and
 * MMAP (emu/kernel/faults.c). */
START_TEST(fail_method_unknown_name)
{
    static const char *const known[] = {
        "GET_CONTEXT", "QUERY_PORT", "QUERY_CONTEXT", "QUERY_GID_TABLE", "QUERY_GID_ENTRY",
        "PD_DESTROY", "MR_DESTROY", "REG_DMABUF_MR", "CQ_CREATE", "CQ_DESTROY", "QP_CREATE",
        "QP_DESTROY", "ASYNC_EVENT_ALLOC", "UAR_OBJ_ALLOC", "UAR_OBJ_DESTROY", "QUERY_DEVICE",
        "ALLOC_PD", "DEALLOC_PD", "REG_MR", "DEREG_MR", "CREATE_COMP_CHANNEL", "CREATE_CQ",
        "DESTROY_CQ", "CREATE_QP", "QUERY_QP", "MODIFY_QP", "DESTROY_QP", "EX_QUERY_DEVICE",
        "EX_MODIFY_QP", "MMAP",
    };
    mlxd_emu_fail_clear();
    ck_assert_int_eq(mlxd_emu_fail_method("NO_SUCH_METHOD", 1, 5), -EINVAL);
    ck_assert_int_eq(mlxd_emu_fail_method("alloc_pd", 1, 5), -EINVAL);     /* names are exact */
    ck_assert_int_eq(mlxd_emu_fail_method("INVOKE_WRITE", 1, 5), -EINVAL); /* checked by its command */
    ck_assert_int_eq(mlxd_emu_fail_method("*", 1, 5), -EINVAL);
    ck_assert_int_eq(mlxd_emu_fail_method(NULL, 1, 5), -EINVAL);
    /* no rule was made by the refusals: all 32 slots are still free */
    size_t nk = sizeof known / sizeof known[0];
    for (unsigned i = 0; i < 32; i++)
        ck_assert_msg(mlxd_emu_fail_method(known[i % nk], 1000000, 5) == 0, "rule %u (%s) refused", i,
                      known[i % nk]);
    ck_assert_int_eq(mlxd_emu_fail_method("ALLOC_PD", 1, 5), -ENOSPC);
    mlxd_emu_fail_clear();
}
END_TEST

Suite *emu_gaps_suite(void)
{
    Suite *s = suite_create("emu_gaps");
    TCase *tc = tcase_create("gaps");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, rx_write_requests_live);
    tcase_add_test(tc, port_event_context_without_objects);
    tcase_add_test(tc, asan_preloaded_into_timeout);
    tcase_add_test(tc, stale_trees_swept);
    tcase_add_test(tc, fail_method_unknown_name);
    suite_add_tcase(s, tc);
    return s;
}
