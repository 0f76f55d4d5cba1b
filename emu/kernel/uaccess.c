/* uaccess.c: reading and writing the process's memory the way the kernel's copy_from_user /
 * copy_to_user do: a bad address gives -EFAULT instead of a crash.  The emulator runs inside the
 * process, so it uses process_vm_readv/process_vm_writev on its own pid (the kernel checks the
 * page tables and protections for us); when those are unavailable it falls back to
 * /proc/self/maps.  emu_check_range() is the ib_umem_get() analogue for rings, doorbell records
 * and MRs: every page of the range must be mapped with the access the object needs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>
#include "kernel.h"

static int pvm_broken;     /* process_vm_* refused (seccomp): use /proc/self/maps */

static int maps_check(uint64_t start, uint64_t len, int prot)
{
    if (!len) return 0;
    uint64_t end = start + len;
    if (end < start) return -EFAULT;
    int fd = emu_real.open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -EFAULT;
    char buf[8192], line[512];
    size_t ll = 0;
    uint64_t covered = start;
    ssize_t n;
    int ok = -EFAULT;
    while ((n = emu_real.read(fd, buf, sizeof buf)) > 0 && ok) {
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != '\n') { if (ll < sizeof line - 1) line[ll++] = buf[i]; continue; }
            line[ll] = 0;
            ll = 0;
            unsigned long long a, b;
            char perms[8];
            if (sscanf(line, "%llx-%llx %7s", &a, &b, perms) != 3) continue;
            if (b <= covered || a > covered) continue;
            if ((prot & PROT_READ) && perms[0] != 'r') goto out;
            if ((prot & PROT_WRITE) && perms[1] != 'w') goto out;
            covered = b;
            if (covered >= end) { ok = 0; goto out; }
        }
    }
out:
    emu_real.close(fd);
    return ok;
}

int emu_copy_from_user(void *dst, uint64_t uaddr, size_t len)
{
    if (!len) return 0;
    if (uaddr + len < uaddr) return -EFAULT;
    if (!pvm_broken) {
        struct iovec l = { dst, len }, r = { (void *)(uintptr_t)uaddr, len };
        ssize_t n = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
        if (n == (ssize_t)len) return 0;
        if (n >= 0 || errno == EFAULT) return -EFAULT;
        if (errno != ENOSYS && errno != EPERM) return -EFAULT;
        pvm_broken = 1;
    }
    if (maps_check(uaddr, len, PROT_READ)) return -EFAULT;
    memcpy(dst, (const void *)(uintptr_t)uaddr, len);
    return 0;
}

int emu_copy_to_user(uint64_t uaddr, const void *src, size_t len)
{
    if (!len) return 0;
    if (uaddr + len < uaddr) return -EFAULT;
    if (!pvm_broken) {
        struct iovec l = { (void *)src, len }, r = { (void *)(uintptr_t)uaddr, len };
        ssize_t n = process_vm_writev(getpid(), &l, 1, &r, 1, 0);
        if (n == (ssize_t)len) return 0;
        if (n >= 0 || errno == EFAULT) return -EFAULT;
        if (errno != ENOSYS && errno != EPERM) return -EFAULT;
        pvm_broken = 1;
    }
    if (maps_check(uaddr, len, PROT_WRITE)) return -EFAULT;
    memcpy((void *)(uintptr_t)uaddr, src, len);
    return 0;
}

int emu_clear_user(uint64_t uaddr, size_t len)
{
    static const uint8_t zero[256];
    while (len) {
        size_t c = len < sizeof zero ? len : sizeof zero;
        int r = emu_copy_to_user(uaddr, zero, c);
        if (r) return r;
        uaddr += c;
        len -= c;
    }
    return 0;
}

int emu_user_buffer_cleared(uint64_t uaddr, size_t len)
{
    uint8_t buf[256];
    while (len) {
        size_t c = len < sizeof buf ? len : sizeof buf;
        int r = emu_copy_from_user(buf, uaddr, c);
        if (r) return r;
        for (size_t i = 0; i < c; i++) if (buf[i]) return 0;
        uaddr += c;
        len -= c;
    }
    return 1;
}

int emu_check_range(uint64_t uaddr, uint64_t len, int prot)
{
    if (!len) return 0;
    if (uaddr + len < uaddr || uaddr == 0) return -EFAULT;
    /* Writable mappings must be checked through the maps (a probe write could race with the
     * process); readable ones are probed one byte per page with process_vm_readv. */
    if ((prot & PROT_WRITE) || pvm_broken) return maps_check(uaddr, len, prot);
    uint64_t first = uaddr & ~(uint64_t)(EMU_PAGE - 1);
    uint64_t last = (uaddr + len - 1) & ~(uint64_t)(EMU_PAGE - 1);
    uint8_t sink[64];
    struct iovec l = { sink, 1 };
    struct iovec r[64];
    uint64_t p = first;
    while (p <= last) {
        int k = 0;
        for (; k < 64 && p <= last; k++, p += EMU_PAGE) {
            uint64_t a = p < uaddr ? uaddr : p;
            r[k].iov_base = (void *)(uintptr_t)a;
            r[k].iov_len = 1;
        }
        l.iov_len = (size_t)k;
        ssize_t n = process_vm_readv(getpid(), &l, 1, r, (unsigned long)k, 0);
        if (n != k) {
            if (n < 0 && (errno == ENOSYS || errno == EPERM)) { pvm_broken = 1; return maps_check(uaddr, len, prot); }
            return -EFAULT;
        }
    }
    return 0;
}
