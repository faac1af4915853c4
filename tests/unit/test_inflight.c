/* Unit tests for the caps on questions waiting for an upstream. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>

#include "client_addr.h"
#include "moat/inflight.h"

#define SA(x) ((const struct sockaddr *)&(x))

Test(inflight, off_when_zero)
{
	cr_expect_null(inflight_new(0, 1, 16));
	cr_expect_null(inflight_new(1, 0, 16));
}

Test(inflight, per_client_cap_and_give_back)
{
	struct inflight *t = inflight_new(1000, 3, 4096);
	struct sockaddr_in a = v4("192.0.2.1");
	uint32_t s[4];
	for (int i = 0; i < 3; i++)
		cr_assert_eq(inflight_take(t, SA(a), &s[i]), INFLIGHT_OK);
	cr_expect_eq(inflight_take(t, SA(a), &s[3]), INFLIGHT_CLIENT);
	cr_expect_eq(inflight_total(t), 3, "a refused question is not counted");
	inflight_give(t, s[0]);
	cr_expect_eq(inflight_take(t, SA(a), &s[3]), INFLIGHT_OK, "room again once one ends");
	inflight_free(t);
}

Test(inflight, one_client_leaves_room_for_another)
{
	struct inflight *t = inflight_new(1000, 5, 4096);
	struct sockaddr_in a = v4("192.0.2.1"), b = v4("192.0.2.2");
	uint32_t s;
	int ok = 0;
	for (int i = 0; i < 100; i++)
		ok += inflight_take(t, SA(a), &s) == INFLIGHT_OK;
	cr_expect_eq(ok, 5);
	cr_expect_eq(inflight_take(t, SA(b), &s), INFLIGHT_OK);
	inflight_free(t);
}

Test(inflight, total_cap)
{
	struct inflight *t = inflight_new(10, 100, 4096);
	char txt[32];
	uint32_t s;
	int ok = 0, total = 0;
	for (int i = 0; i < 50; i++) {
		snprintf(txt, sizeof(txt), "198.51.100.%d", i + 1);
		struct sockaddr_in c = v4(txt);
		enum inflight_result r = inflight_take(t, SA(c), &s);
		ok += r == INFLIGHT_OK;
		total += r == INFLIGHT_TOTAL;
	}
	cr_expect_eq(ok, 10);
	cr_expect_eq(total, 40);
	cr_expect_eq(inflight_total(t), 10);
	inflight_free(t);
}

Test(inflight, ipv6_counts_per_64)
{
	struct inflight *t = inflight_new(1000, 2, 4096);
	struct sockaddr_in6 a = v6("2001:db8:1:2::1"), b = v6("2001:db8:1:2:ffff::9");
	uint32_t s;
	cr_expect_eq(inflight_take(t, SA(a), &s), INFLIGHT_OK);
	cr_expect_eq(inflight_take(t, SA(b), &s), INFLIGHT_OK);
	cr_expect_eq(inflight_take(t, SA(b), &s), INFLIGHT_CLIENT, "same /64, same cap");
	inflight_free(t);
}

static void *taker(void *arg)
{
	struct inflight *t = arg;
	struct sockaddr_in a = v4("192.0.2.7");
	for (int i = 0; i < 20000; i++) {
		uint32_t s;
		if (inflight_take(t, SA(a), &s) == INFLIGHT_OK)
			inflight_give(t, s);
	}
	return NULL;
}

Test(inflight, threads_leave_counts_balanced)
{
	struct inflight *t = inflight_new(3, 2, 16);
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, taker, t);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	cr_expect_eq(inflight_total(t), 0);
	struct sockaddr_in a = v4("192.0.2.7");
	uint32_t s;
	cr_expect_eq(inflight_take(t, SA(a), &s), INFLIGHT_OK);
	cr_expect_eq(inflight_take(t, SA(a), &s), INFLIGHT_OK);
	cr_expect_eq(inflight_take(t, SA(a), &s), INFLIGHT_CLIENT);
	inflight_free(t);
}
