/* mlxd_error.h: how every mlx5direct call reports failure.
 *
 * A call that fails returns a negative errno (-EINVAL, -ENOMEM, ...) and keeps a message that
 * names the call and the reason: the file, the kernel's errno text, or the bound that was
 * exceeded, e.g. "mlxd_cq_create: 8388608 entries exceeds the device's maximum 4194304".
 * The message is per thread and stays until the next failing call on the same thread.
 * Library code never prints, aborts or exits.
 *
 * Misuse (NULL where an object is required, a destroyed object, an out-of-range option) gives
 * -EINVAL and changes nothing.
 */
#ifndef MLXD_ERROR_H
#define MLXD_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* The message of the last call that failed on this thread ("" if none).  The string belongs to
 * the library and stays valid until the next mlx5direct call on this thread. */
const char *mlxd_errmsg(void);

/* Records a message for this thread (printf-style) and returns -err.  For the library's own
 * modules and for applications layering on it.  err is a positive errno (a negative one is
 * returned as is).  err 0 is a programming error (a failure path without an errno, e.g. a
 * saved errno that was 0): the message is recorded and -EIO is returned, so that a failure
 * can never read as success. */
int mlxd_err(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clears this thread's message. */
void mlxd_err_clear(void);

#ifdef __cplusplus
}
#endif
#endif
