/* api.c: the exported test/observability interface (mlxd_emu.h). */
#include <errno.h>
#include <string.h>
#include "kernel.h"
#include "mlxd_emu.h"

EMU_API int mlxd_emu_get_counts(struct mlxd_emu_counts *c)
{
    if (!c || c->sz < offsetof(struct mlxd_emu_counts, files) + sizeof c->files) return -EINVAL;
    emu_init();
    struct mlxd_emu_counts t;
    memset(&t, 0, sizeof t);
    pthread_mutex_lock(&emu_g.lock);
    t.files = emu_g.nfiles;
    t.contexts = emu_g.ncontexts;
    t.mappings = emu_g.nmaps;
    pthread_mutex_lock(&emu_g.ev_lock);
    t.pd = emu_g.live[EMU_OBJ_PD];
    t.mr = emu_g.live[EMU_OBJ_MR];
    t.cq = emu_g.live[EMU_OBJ_CQ];
    t.qp = emu_g.live[EMU_OBJ_QP];
    t.uar = emu_g.live[EMU_OBJ_UAR];
    t.comp_channel = emu_g.live[EMU_OBJ_COMP_CHANNEL];
    t.async_event = emu_g.live[EMU_OBJ_ASYNC_EVENT];
    t.srq = emu_g.live[EMU_OBJ_SRQ];
    t.ah = emu_g.live_ah;
    t.mw = emu_g.live_mw;
    pthread_mutex_unlock(&emu_g.ev_lock);
    t.event_fds = t.comp_channel + t.async_event;
    t.kernel_calls = emu_g.kernel_calls;
    pthread_mutex_unlock(&emu_g.lock);
    size_t n = c->sz < sizeof t ? c->sz : sizeof t;
    t.sz = c->sz;
    memcpy(c, &t, n);
    return 0;
}

EMU_API unsigned mlxd_emu_live_total(void)
{
    struct mlxd_emu_counts c = { .sz = sizeof c };
    if (mlxd_emu_get_counts(&c)) return 0;
    return c.files + c.mappings + c.pd + c.mr + c.cq + c.qp + c.uar + c.comp_channel + c.async_event + c.srq +
           c.ah + c.mw;
}

EMU_API bool mlxd_emu_active(void) { emu_init(); return emu_g.active; }

EMU_API const char *mlxd_emu_sysfs_path(void) { emu_init(); return emu_g.active ? emu_g.sysfs_root : ""; }

EMU_API int mlxd_emu_num_devices(void) { emu_init(); return emu_g.active ? (int)emu_g.ndev : 0; }

EMU_API int mlxd_emu_configure(const char *devices)
{
    emu_init();
    struct emu_device_cfg cfg[EMU_MAX_DEVICES];
    unsigned n = 0;
    char err[256];
    if (devices && *devices) {
        int r = emu_config_parse(devices, cfg, &n, err, sizeof err);
        if (r) return r;
    } else {
        emu_config_defaults(cfg, &n);
    }
    pthread_mutex_lock(&emu_g.lock);
    int r = emu_g.nfiles ? -EBUSY : emu_config_apply(cfg, n);
    if (!r) emu_g.active = true;
    pthread_mutex_unlock(&emu_g.lock);
    return r;
}

EMU_API int mlxd_emu_fail_nth_call(unsigned n, int err) { emu_init(); return emu_fault_add("*", n, err); }
EMU_API int mlxd_emu_fail_method(const char *m, unsigned n, int err)
{
    emu_init();
    if (m && !strcmp(m, "*")) return -EINVAL;
    return emu_fault_add(m, n, err);
}
EMU_API void mlxd_emu_fail_clear(void) { emu_init(); emu_fault_clear(); }

EMU_API int mlxd_emu_set_link(unsigned dev, bool up)
{
    emu_init();
    pthread_mutex_lock(&emu_g.lock);
    if (dev >= emu_g.ndev) { pthread_mutex_unlock(&emu_g.lock); return -EINVAL; }
    struct emu_device *d = &emu_g.devs[dev].dev;
    pthread_mutex_lock(&d->lock);
    /* the engine raises PORT_ACTIVE/PORT_ERR (emu.h emu_nic_port_event) */
    if (d->cfg.link_up != up) emu_nic_port_event(d, up);
    d->cfg.link_up = up;
    pthread_mutex_unlock(&d->lock);
    int r = emu_sysfs_update_port(dev);
    pthread_mutex_unlock(&emu_g.lock);
    return r;
}
