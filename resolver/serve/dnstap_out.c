/* dnstap_out.c owns moatd's dnstap output (`dnstap: {file|socket: PATH}`): one Frame Streams
 * writer behind libfstrm's I/O thread, one single-producer input queue per worker. A worker
 * encodes its message (moat/dnstap.h) into a frame and hands it to its queue; the I/O thread
 * writes it, so the query path never waits on the file or the collector. A full queue drops the
 * frame (dnstap is an observation, never a reason to hold an answer). The I/O thread is created
 * at start-up, before privileges drop and the system-call filter is loaded, and the writer is
 * opened before it; afterwards the thread needs only write/writev, futex, clock and (socket
 * mode, to reconnect) AF_UNIX socket/connect, which the filter allows. */
#include <fstrm.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "moat/dnstap.h"
#include "moat/err.h"
#include "serve/dnstap_out.h"
#include "serve/worker.h"

static struct fstrm_iothr *iothr;
static const char *tap_identity, *tap_version;

int dnstap_out_start(const struct config *cfg, unsigned nworkers, const char *identity,
                     const char *version, char *err, size_t errlen)
{
	if (!cfg->dnstap_path)
		return 0;
	struct fstrm_writer_options *wopt = fstrm_writer_options_init();
	fstrm_writer_options_add_content_type(wopt, DNSTAP_CONTENT_TYPE,
	                                      strlen(DNSTAP_CONTENT_TYPE));
	struct fstrm_writer *w = NULL;
	if (cfg->dnstap_socket) {
		struct fstrm_unix_writer_options *uopt = fstrm_unix_writer_options_init();
		fstrm_unix_writer_options_set_socket_path(uopt, cfg->dnstap_path);
		w = fstrm_unix_writer_init(uopt, wopt);
		fstrm_unix_writer_options_destroy(&uopt);
	} else {
		struct fstrm_file_options *fopt = fstrm_file_options_init();
		fstrm_file_options_set_file_path(fopt, cfg->dnstap_path);
		w = fstrm_file_writer_init(fopt, wopt);
		fstrm_file_options_destroy(&fopt);
	}
	fstrm_writer_options_destroy(&wopt);
	/* Opened here, before the filter, not by the I/O thread: the file is created (or the
	 * collector reached) with the rights moatd starts with. A collector that is not up yet is
	 * retried by the I/O thread (an AF_UNIX socket and connect, which the filter allows). */
	if (!w || (fstrm_writer_open(w) != fstrm_res_success && !cfg->dnstap_socket)) {
		if (w)
			fstrm_writer_destroy(&w);
		snprintf(err, errlen, "dnstap: cannot open %s", cfg->dnstap_path);
		return MOAT_EIO;
	}
	struct fstrm_iothr_options *iopt = fstrm_iothr_options_init();
	fstrm_iothr_options_set_num_input_queues(iopt, nworkers);
	fstrm_iothr_options_set_queue_model(iopt, FSTRM_IOTHR_QUEUE_MODEL_SPSC);
	iothr = fstrm_iothr_init(iopt, &w);
	fstrm_iothr_options_destroy(&iopt);
	if (!iothr) {
		fstrm_writer_destroy(&w);
		snprintf(err, errlen, "dnstap: cannot start the writer for %s", cfg->dnstap_path);
		return MOAT_EIO;
	}
	tap_identity = identity;
	tap_version = version;
	return 0;
}

void dnstap_out_attach(struct worker *w)
{
	w->dnstap = iothr ? fstrm_iothr_get_input_queue_idx(iothr, w->index) : NULL;
}

void dnstap_out_stop(void)
{
	if (iothr)
		fstrm_iothr_destroy(&iothr); /* writes what is queued, then closes */
}

static void submit(struct worker *srv, struct dnstap_msg *m)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	m->sec = (uint64_t)ts.tv_sec;
	m->nsec = (uint32_t)ts.tv_nsec;
	m->identity = tap_identity;
	m->version = tap_version;
	uint8_t *frame = malloc(DNSTAP_MAX(m->len));
	int n = frame ? dnstap_encode(m, frame, DNSTAP_MAX(m->len)) : MOAT_ENOMEM;
	if (n < 0 || fstrm_iothr_submit(iothr, srv->dnstap, frame, (size_t)n, fstrm_free_wrapper,
	                                NULL) != fstrm_res_success)
		free(frame); /* the queue is full or the frame did not encode: dropped */
}

void dnstap_client(struct worker *srv, const struct sockaddr *client, bool tcp, const uint8_t *msg,
                   size_t len, bool response)
{
	struct dnstap_msg m = {
	    .type = response ? DNSTAP_CLIENT_RESPONSE : DNSTAP_CLIENT_QUERY,
	    .tcp = tcp,
	    .query_addr = client,
	    .dns = msg,
	    .len = len,
	};
	submit(srv, &m);
}

void dnstap_forwarder(struct worker *srv, const struct sockaddr *upstream, const uint8_t *msg,
                      size_t len, bool tcp, bool response)
{
	struct dnstap_msg m = {
	    .type = response ? DNSTAP_FORWARDER_RESPONSE : DNSTAP_FORWARDER_QUERY,
	    .tcp = tcp,
	    .response_addr = upstream,
	    .dns = msg,
	    .len = len,
	};
	submit(srv, &m);
}
