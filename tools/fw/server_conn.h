/* server_conn.h: moat-fw's grant socket and its connections (server_conn.c). */
#ifndef MOAT_FW_SERVER_CONN_H
#define MOAT_FW_SERVER_CONN_H

#include <stdint.h>

#include "server_state.h"

/* Create, bind and listen on o->socket_path (srv->listen_fd), replacing a stale socket file,
 * never another kind of file. 0, or MOAT_EINVAL / MOAT_EIO with a line on stderr. */
int fwsrv_listen(struct fwsrv *srv);

/* Start accepting on srv->listen_fd from srv->loop. */
void fwsrv_accept_start(struct fwsrv *srv);

/* Send one ACK to c (NULL: its connection is gone; nothing is sent). A connection that fails or
 * does not read its ACKs is closed, which clears its grants' conn in srv->pending. */
void fwsrv_send_ack(struct fwsrv_conn *c, uint16_t status, uint32_t seq, uint32_t lifetime);

/* Close every connection (at stop). */
void fwsrv_conns_close(struct fwsrv *srv);

#endif
