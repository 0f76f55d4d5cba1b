/* Temporary stubs so that code written against the public headers links (replaced step by step). */
#include <errno.h>
#include <stdlib.h>
#include "mlxd_error.h"
#include "mlxd_uverbs.h"
#include "mlxd_mlx5.h"
#define STUB(name) return mlxd_err(ENOSYS, #name ": not implemented yet")
const char *mlxd_sysfs_root(void) { return "/sys"; }
int mlxd_names(char ***o, size_t *c) { (void)o; (void)c; STUB(mlxd_names); }
void mlxd_names_free(char **n, size_t c) { for (size_t i = 0; i < c; i++) free(n[i]); free(n); }
int mlxd_open(const char *n, const struct mlxd_open_opts *o, struct mlxd_nic **out) { (void)n; (void)o; (void)out; STUB(mlxd_open); }
int mlxd_close(struct mlxd_nic *nic) { (void)nic; STUB(mlxd_close); }
int mlxd_port_info(const struct mlxd_nic *nic, struct mlxd_port_info *o) { (void)nic; (void)o; STUB(mlxd_port_info); }
int mlxd_link_layer(const struct mlxd_nic *nic) { (void)nic; STUB(mlxd_link_layer); }
uint32_t mlxd_max_message(const struct mlxd_nic *nic) { (void)nic; return 0; }
const char *mlxd_nic_name(const struct mlxd_nic *nic) { (void)nic; return ""; }
int mlxd_gids(const struct mlxd_nic *nic, struct mlxd_gid *o, size_t c) { (void)nic; (void)o; (void)c; STUB(mlxd_gids); }
int mlxd_default_gid_index(const struct mlxd_nic *nic) { (void)nic; STUB(x); }
int mlxd_gid_for_peer(const struct mlxd_nic *nic, const struct sockaddr *p, socklen_t l, struct mlxd_gid *g) { (void)nic; (void)p; (void)l; (void)g; STUB(x); }
int mlxd_region_register(struct mlxd_nic *nic, void *a, size_t l, const struct mlxd_region_opts *o, struct mlxd_region **out) { (void)nic; (void)a; (void)l; (void)o; (void)out; STUB(x); }
int mlxd_region_register_dmabuf(struct mlxd_nic *nic, int fd, uint64_t off, size_t l, const struct mlxd_region_opts *o, struct mlxd_region **out) { (void)nic; (void)fd; (void)off; (void)l; (void)o; (void)out; STUB(x); }
struct mlxd_local mlxd_region_local(const struct mlxd_region *r) { (void)r; struct mlxd_local z = {0}; return z; }
struct mlxd_remote mlxd_region_remote(const struct mlxd_region *r) { (void)r; struct mlxd_remote z = {0}; return z; }
int mlxd_region_slice(const struct mlxd_region *r, uint64_t off, uint32_t len, struct mlxd_local *o) { (void)r; (void)off; (void)len; (void)o; STUB(x); }
int mlxd_region_deregister(struct mlxd_region *r) { (void)r; STUB(x); }
int mlxd_cq_create(struct mlxd_nic *nic, uint32_t e, const struct mlxd_cq_opts *o, struct mlxd_cq **out) { (void)nic; (void)e; (void)o; (void)out; STUB(x); }
int mlxd_cq_destroy(struct mlxd_cq *cq) { (void)cq; STUB(x); }
uint32_t mlxd_cq_size(const struct mlxd_cq *cq) { (void)cq; return 0; }
int mlxd_qp_create(struct mlxd_cq *cq, const struct mlxd_qp_opts *o, struct mlxd_qp **out) { (void)cq; (void)o; (void)out; STUB(x); }
int mlxd_qp_endpoint(const struct mlxd_qp *qp, struct mlxd_endpoint *o) { (void)qp; (void)o; STUB(x); }
int mlxd_qp_connect(struct mlxd_qp *qp, const struct mlxd_endpoint *p, const struct mlxd_connect_opts *o) { (void)qp; (void)p; (void)o; STUB(x); }
int mlxd_qp_to_error(struct mlxd_qp *qp) { (void)qp; STUB(x); }
int mlxd_qp_state(const struct mlxd_qp *qp) { (void)qp; STUB(x); }
int mlxd_qp_destroy(struct mlxd_qp *qp) { (void)qp; STUB(x); }
int mlxd_wait(struct mlxd_nic *nic, int ms, struct mlxd_event *o, size_t c) { (void)nic; (void)ms; (void)o; (void)c; STUB(x); }
int mlxd_event_fds(const struct mlxd_nic *nic, int *a, int *c) { (void)nic; (void)a; (void)c; STUB(x); }
int mlxd_qp_post(struct mlxd_qp *qp, const struct mlxd_entry *e) { (void)qp; (void)e; STUB(x); }
int mlxd_qp_ring(struct mlxd_qp *qp) { (void)qp; STUB(x); }
int mlxd_qp_receive(struct mlxd_qp *qp, const struct mlxd_recv *r, size_t n) { (void)qp; (void)r; (void)n; STUB(x); }
int mlxd_qp_send_room(const struct mlxd_qp *qp) { (void)qp; STUB(x); }
int mlxd_qp_recv_room(const struct mlxd_qp *qp) { (void)qp; STUB(x); }
int mlxd_cq_poll(struct mlxd_cq *cq, struct mlxd_completion *o, int m) { (void)cq; (void)o; (void)m; STUB(x); }
int mlxd_cq_arm(struct mlxd_cq *cq, bool s) { (void)cq; (void)s; STUB(x); }
int mlxd_cq_create_detached(uint32_t e, struct mlxd_cq **out) { (void)e; (void)out; STUB(x); }
int mlxd_cq_ring(struct mlxd_cq *cq, volatile void **r, uint32_t *n, volatile uint32_t **d) { (void)cq; (void)r; (void)n; (void)d; STUB(x); }
int mlxd_replay_start(struct mlxd_cq *cq, const char *p, const struct mlxd_replay_opts *o, struct mlxd_replay **out) { (void)cq; (void)p; (void)o; (void)out; STUB(x); }
long mlxd_replay_finish(struct mlxd_replay *rp, bool s) { (void)rp; (void)s; STUB(x); }
