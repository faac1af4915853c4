/* dnstap (https://dnstap.info) messages, encoded by hand: a bounded protobuf writer for the one
 * message shape moatd emits, instead of protobuf-c and generated code. The schema is small and
 * fixed, the encoder allocates nothing and cannot overrun its buffer, and there is no
 * build-time code generator to keep in step; dnstap-ldns reads the result (e2e test_operable).
 *
 * Fields written (dnstap.proto field numbers):
 *   Dnstap  { identity = 1 (bytes), version = 2 (bytes), message = 14 (Message),
 *             type = 15 (enum, MESSAGE = 1) }
 *   Message { type = 1 (enum), socket_family = 2 (INET 1, INET6 2), socket_protocol = 3
 *             (UDP 1, TCP 2), query_address = 4, response_address = 5 (bytes),
 *             query_port = 6, response_port = 7 (uint32), query_time_sec = 8 (uint64),
 *             query_time_nsec = 9 (fixed32), query_message = 10 (bytes),
 *             response_time_sec = 12 (uint64), response_time_nsec = 13 (fixed32),
 *             response_message = 14 (bytes) }
 * A query message carries query_time and query_message; a response carries response_time and
 * response_message. Frames travel in Frame Streams with content type "protobuf:dnstap.Dnstap". */
#ifndef MOAT_DNSTAP_H
#define MOAT_DNSTAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define DNSTAP_CONTENT_TYPE "protobuf:dnstap.Dnstap"

enum dnstap_type {
	DNSTAP_CLIENT_QUERY = 5,
	DNSTAP_CLIENT_RESPONSE = 6,
	DNSTAP_FORWARDER_QUERY = 7,
	DNSTAP_FORWARDER_RESPONSE = 8,
};

struct dnstap_msg {
	enum dnstap_type type;
	bool tcp;
	const struct sockaddr *query_addr;    /* client (CLIENT_*); NULL: left out */
	const struct sockaddr *response_addr; /* upstream (FORWARDER_*); NULL: left out */
	uint64_t sec;                         /* time of the query or the response */
	uint32_t nsec;
	const uint8_t *dns; /* the DNS message */
	size_t len;
	const char *identity, *version; /* NULL: left out */
};

/* Bytes enough for any message of len DNS bytes with identity and version up to 255 each. */
#define DNSTAP_MAX(len) ((len) + 640)

/* Encode m as a serialized Dnstap protobuf. Returns the length or MOAT_ESPACE. Pure. */
int dnstap_encode(const struct dnstap_msg *m, uint8_t *out, size_t cap);

#endif
