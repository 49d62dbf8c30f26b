// pandastack-node-hello: the Node function shim's part of a restore's
// hello (internal/functions/hello.go). A fresh invocation's VM is restored
// with the snapshot's kernel RNG and clock; before the handler runs, the
// kernel's RNG must take a seed from the host and reseed, and the clock
// must be the host's. Python's shim does that itself (fcntl.ioctl,
// time.clock_settime_ns); Node has neither call, so without this addon a
// Node VM waits for the guest agent's hello — ~70 ms of a fresh
// invocation under TCG, most of it the agent's Go runtime woken for the
// first time in a new QEMU.
//
// A Node-API addon (the stable C ABI of node_api.h, declared here from
// its documentation: nodejs.org/api/n-api.html), loaded by shim.mjs with
// process.dlopen before the snapshot. One function:
//
//   hello(fd, seed, sec, nsec) -> 0 or -errno
//
// mixes seed (a Buffer, 32–512 bytes) into the kernel's RNG through fd
// (/dev/urandom, opened by the shim) with RNDADDENTROPY, credited, has
// the RNG reseed at once (RNDRESEEDCRNG) and sets CLOCK_REALTIME to
// sec.nsec. Both need root (CAP_SYS_ADMIN, CAP_SYS_TIME): the shim of a
// template whose user is not root gets -EPERM and the host has the agent
// do it.
//
// Built by scripts/build-node-hello (scripts/setup runs it).
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <linux/random.h>

typedef struct napi_env__ *napi_env;
typedef struct napi_value__ *napi_value;
typedef struct napi_callback_info__ *napi_callback_info;
typedef int napi_status; // napi_ok is 0
typedef napi_value (*napi_callback)(napi_env env, napi_callback_info info);

napi_status napi_get_cb_info(napi_env env, napi_callback_info info, size_t *argc, napi_value *argv,
                             napi_value *this_arg, void **data);
napi_status napi_get_value_int32(napi_env env, napi_value value, int32_t *result);
napi_status napi_get_value_int64(napi_env env, napi_value value, int64_t *result);
napi_status napi_get_buffer_info(napi_env env, napi_value value, void **data, size_t *length);
napi_status napi_create_int32(napi_env env, int32_t value, napi_value *result);
napi_status napi_create_function(napi_env env, const char *utf8name, size_t length, napi_callback cb,
                                 void *data, napi_value *result);
napi_status napi_set_named_property(napi_env env, napi_value object, const char *utf8name, napi_value value);

enum { max_seed = 512 };

static int do_hello(int fd, const void *seed, size_t n, int64_t sec, int64_t nsec) {
	union {
		struct rand_pool_info info;
		unsigned char raw[sizeof(struct rand_pool_info) + max_seed];
	} p;
	if (n < 32 || n > max_seed || nsec < 0 || nsec >= 1000000000)
		return -EINVAL;
	p.info.entropy_count = (int)(8 * n);
	p.info.buf_size = (int)n;
	memcpy(p.info.buf, seed, n);
	if (ioctl(fd, RNDADDENTROPY, &p.info) != 0)
		return -errno;
	if (ioctl(fd, RNDRESEEDCRNG) != 0)
		return -errno;
	struct timespec ts = {.tv_sec = (time_t)sec, .tv_nsec = (long)nsec};
	if (clock_settime(CLOCK_REALTIME, &ts) != 0)
		return -errno;
	return 0;
}

static napi_value hello(napi_env env, napi_callback_info info) {
	size_t argc = 4;
	napi_value argv[4], out = NULL;
	int32_t fd = -1;
	int64_t sec = 0, nsec = 0;
	void *seed = NULL;
	size_t n = 0;
	int rc = -EINVAL;
	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) == 0 && argc == 4 &&
	    napi_get_value_int32(env, argv[0], &fd) == 0 && napi_get_buffer_info(env, argv[1], &seed, &n) == 0 &&
	    napi_get_value_int64(env, argv[2], &sec) == 0 && napi_get_value_int64(env, argv[3], &nsec) == 0)
		rc = do_hello(fd, seed, n, sec, nsec);
	napi_create_int32(env, rc, &out);
	return out;
}

// napi_register_module_v1 is the symbol Node looks up in an addon that
// does not register itself.
__attribute__((visibility("default"))) napi_value napi_register_module_v1(napi_env env, napi_value exports) {
	napi_value fn;
	if (napi_create_function(env, "hello", 5, hello, NULL, &fn) != 0 ||
	    napi_set_named_property(env, exports, "hello", fn) != 0)
		return NULL;
	return exports;
}
