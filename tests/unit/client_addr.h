/* Client addresses for the unit tests of per-client tables (rate limit, in-flight caps). */
#ifndef MOAT_TEST_CLIENT_ADDR_H
#define MOAT_TEST_CLIENT_ADDR_H

#include <arpa/inet.h>
#include <netinet/in.h>

static inline struct sockaddr_in v4(const char *a)
{
	struct sockaddr_in s = {.sin_family = AF_INET};
	inet_pton(AF_INET, a, &s.sin_addr);
	return s;
}

static inline struct sockaddr_in6 v6(const char *a)
{
	struct sockaddr_in6 s = {.sin6_family = AF_INET6};
	inet_pton(AF_INET6, a, &s.sin6_addr);
	return s;
}

#endif
