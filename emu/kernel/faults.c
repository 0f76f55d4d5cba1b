/* faults.c: fault injection.  A rule fails the Nth matching kernel call (counted from when the
 * rule is set, 1 = the next one) with a chosen errno, once.  "*" matches every kernel call
 * (ioctl, write or mmap on a uverbs fd); any other name matches the calls of that method:
 * ioctl methods (GET_CONTEXT, QUERY_PORT, QUERY_GID_TABLE, QUERY_GID_ENTRY, QUERY_CONTEXT,
 * CQ_CREATE, CQ_DESTROY, QP_CREATE, QP_DESTROY, SRQ_CREATE, SRQ_DESTROY, PD_DESTROY, MR_DESTROY, REG_DMABUF_MR,
 * ASYNC_EVENT_ALLOC, UAR_OBJ_ALLOC, UAR_OBJ_DESTROY), legacy commands whether sent by write()
 * or INVOKE_WRITE (GET_CONTEXT, QUERY_DEVICE, QUERY_PORT, ALLOC_PD, DEALLOC_PD, REG_MR,
 * DEREG_MR, CREATE_COMP_CHANNEL, CREATE_CQ, DESTROY_CQ, CREATE_QP, QUERY_QP, MODIFY_QP,
 * DESTROY_QP, MODIFY_SRQ, QUERY_SRQ, CREATE_AH, DESTROY_AH, EX_QUERY_DEVICE, EX_MODIFY_QP) and
 * MMAP.
 * Any other name is refused (-EINVAL): no call has it, so its rule would never fire.
 * Environment: MLXD_EMU_FAIL="<name|*>:<n>:<errno>[,...]", errno as a number or a name; a bad
 * value is reported on stderr (the preloaded emulator has no caller to return it to). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernel.h"

#define MAX_RULES 32
struct rule { char name[40]; unsigned left; int err; };
static struct rule rules[MAX_RULES];
static unsigned nrules;
static pthread_mutex_t flock = PTHREAD_MUTEX_INITIALIZER;

int emu_fault_check(const char *method)
{
    pthread_mutex_lock(&flock);
    if (!method) emu_g.kernel_calls++;
    int err = 0;
    for (unsigned i = 0; i < nrules; i++) {
        bool match = method ? !strcmp(rules[i].name, method) : !strcmp(rules[i].name, "*");
        if (!match || !rules[i].left) continue;
        if (--rules[i].left == 0 && !err) err = rules[i].err;
    }
    /* drop fired rules */
    unsigned j = 0;
    for (unsigned i = 0; i < nrules; i++) if (rules[i].left) rules[j++] = rules[i];
    nrules = j;
    pthread_mutex_unlock(&flock);
    return err;
}

/* The names a rule can match: those emu_fault_check() is called with.  They are the `name`
 * fields of ioctl.c's methods[] (all but INVOKE_WRITE, whose fault check uses the name of the
 * write command it carries), of write.c's wtab[], and mmap.c's "MMAP".  Keep in step with them:
 * a name not here is refused, since a rule for it would never fire. */
static const char *const known_methods[] = {
    /* ioctl methods (ioctl.c methods[]) */
    "GET_CONTEXT", "QUERY_PORT", "QUERY_CONTEXT", "QUERY_GID_TABLE", "QUERY_GID_ENTRY",
    "PD_DESTROY", "MR_DESTROY", "REG_DMABUF_MR", "CQ_CREATE", "CQ_DESTROY", "QP_CREATE",
    "QP_DESTROY", "SRQ_CREATE", "SRQ_DESTROY", "ASYNC_EVENT_ALLOC", "UAR_OBJ_ALLOC",
    "UAR_OBJ_DESTROY", "MW_DESTROY",
    /* legacy commands (write.c wtab[]; GET_CONTEXT and QUERY_PORT above) */
    "QUERY_DEVICE", "ALLOC_PD", "DEALLOC_PD", "REG_MR", "DEREG_MR", "CREATE_COMP_CHANNEL",
    "CREATE_CQ", "DESTROY_CQ", "CREATE_QP", "QUERY_QP", "MODIFY_QP", "DESTROY_QP",
    "MODIFY_SRQ", "QUERY_SRQ", "CREATE_AH", "DESTROY_AH", "EX_QUERY_DEVICE", "EX_MODIFY_QP", "ALLOC_MW", "DEALLOC_MW",
    /* mmap.c */
    "MMAP",
};

static bool emu_fault_method_known(const char *name)
{
    if (!name) return false;
    for (size_t i = 0; i < sizeof known_methods / sizeof known_methods[0]; i++)
        if (!strcmp(known_methods[i], name)) return true;
    return false;
}

int emu_fault_add(const char *name, unsigned n, int err)
{
    if (!name || !*name || strlen(name) >= sizeof rules[0].name || !n || err <= 0 || err > 4095)
        return -EINVAL;
    if (strcmp(name, "*") && !emu_fault_method_known(name))
        return -EINVAL;   /* a rule for a name no call has would never fire */
    pthread_mutex_lock(&flock);
    int r = -ENOSPC;
    if (nrules < MAX_RULES) {
        snprintf(rules[nrules].name, sizeof rules[nrules].name, "%s", name);
        rules[nrules].left = n;
        rules[nrules].err = err;
        nrules++;
        r = 0;
    }
    pthread_mutex_unlock(&flock);
    return r;
}

void emu_fault_clear(void)
{
    pthread_mutex_lock(&flock);
    nrules = 0;
    pthread_mutex_unlock(&flock);
}

static int errno_by_name(const char *s)
{
    static const struct { const char *n; int e; } t[] = {
        { "EPERM", EPERM }, { "ENOENT", ENOENT }, { "EINTR", EINTR }, { "EIO", EIO },
        { "EBADF", EBADF }, { "EAGAIN", EAGAIN }, { "ENOMEM", ENOMEM }, { "EACCES", EACCES },
        { "EFAULT", EFAULT }, { "EBUSY", EBUSY }, { "EEXIST", EEXIST }, { "ENODEV", ENODEV },
        { "EINVAL", EINVAL }, { "ENFILE", ENFILE }, { "EMFILE", EMFILE }, { "ENOTTY", ENOTTY },
        { "ENOSPC", ENOSPC }, { "ENOSYS", ENOSYS }, { "ENODATA", ENODATA },
        { "EPROTONOSUPPORT", EPROTONOSUPPORT }, { "EOPNOTSUPP", EOPNOTSUPP },
        { "ETIMEDOUT", ETIMEDOUT }, { "ECONNREFUSED", ECONNREFUSED },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) if (!strcmp(t[i].n, s)) return t[i].e;
    char *end;
    long v = strtol(s, &end, 10);
    return (*s && !*end && v > 0 && v < 4096) ? (int)v : -1;
}

int emu_fault_parse(const char *spec)
{
    char *copy = strdup(spec), *save = NULL;
    if (!copy) return -ENOMEM;
    int r = 0;
    for (char *ent = strtok_r(copy, ",", &save); ent && !r; ent = strtok_r(NULL, ",", &save)) {
        char *a = strchr(ent, ':'), *b = a ? strchr(a + 1, ':') : NULL;
        if (!a || !b) { r = -EINVAL; break; }
        *a = *b = 0;
        char *end;
        unsigned long n = strtoul(a + 1, &end, 10);
        int e = errno_by_name(b + 1);
        if (*end || !n || n > 0xffffffffu || e < 0) { r = -EINVAL; break; }
        r = emu_fault_add(ent, (unsigned)n, e);
    }
    free(copy);
    return r;
}

void emu_fault_from_env(void)
{
    const char *s = getenv("MLXD_EMU_FAIL");
    if (s && *s && emu_fault_parse(s))
        fprintf(stderr, "mlx5direct-emu: ignoring bad MLXD_EMU_FAIL=%s\n", s);
}
