/* Unit tests for the per-client token buckets. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "client_addr.h"
#include "moat/ratelimit.h"

static int allowed(struct ratelimit *rl, const void *sa, uint64_t now, int n)
{
	int ok = 0;
	for (int i = 0; i < n; i++)
		ok += ratelimit_allow(rl, sa, now);
	return ok;
}

Test(ratelimit, off_when_zero)
{
	cr_assert_null(ratelimit_new(0, 10, 64));
}

Test(ratelimit, burst_then_refill)
{
	struct ratelimit *rl = ratelimit_new(100, 20, 1024);
	struct sockaddr_in c = v4("192.0.2.1");
	cr_assert_not_null(rl);
	cr_expect_eq(allowed(rl, &c, 1000, 50), 20, "a burst of 20, then nothing");
	cr_expect_eq(allowed(rl, &c, 1100, 50), 10, "100 qps: 10 tokens after 100 ms");
	cr_expect_eq(allowed(rl, &c, 1105, 50), 0, "half a token is not a token");
	cr_expect_eq(allowed(rl, &c, 1110, 50), 1, "a whole one after 10 ms");
	cr_expect_eq(allowed(rl, &c, 100000, 50), 20, "refill stops at the burst");
	ratelimit_free(rl);
}

Test(ratelimit, clients_are_separate)
{
	struct ratelimit *rl = ratelimit_new(10, 5, 4096);
	struct sockaddr_in a = v4("192.0.2.1"), b = v4("192.0.2.2");
	cr_expect_eq(allowed(rl, &a, 1, 100), 5);
	cr_expect_eq(allowed(rl, &b, 1, 100), 5, "one client's flood leaves another's budget");
	ratelimit_free(rl);
}

Test(ratelimit, ipv6_counts_per_64)
{
	struct ratelimit *rl = ratelimit_new(10, 5, 4096);
	struct sockaddr_in6 a = v6("2001:db8:1:2::1"), b = v6("2001:db8:1:2:ffff::9"),
	                    c = v6("2001:db8:1:3::1");
	cr_expect_eq(allowed(rl, &a, 1, 3), 3);
	cr_expect_eq(allowed(rl, &b, 1, 100), 2, "the same /64 shares the budget");
	cr_expect_eq(allowed(rl, &c, 1, 100), 5, "another /64 has its own");
	ratelimit_free(rl);
}

struct hammer {
	struct ratelimit *rl;
	int ok;
};

static void *hammer_run(void *arg)
{
	struct hammer *h = arg;
	struct sockaddr_in c = v4("192.0.2.9");
	for (int i = 0; i < 20000; i++)
		h->ok += ratelimit_allow(h->rl, (const struct sockaddr *)&c, 1000);
	return NULL;
}

/* Workers share one table: two threads taking from one client's bucket at the same instant
 * get exactly its burst between them, and every refusal is counted. */
static void two_threads_share(struct ratelimit *rl)
{
	struct hammer a = {rl, 0}, b = {rl, 0};
	pthread_t ta, tb;
	pthread_create(&ta, NULL, hammer_run, &a);
	pthread_create(&tb, NULL, hammer_run, &b);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	cr_expect_eq(a.ok + b.ok, 5000);
	cr_expect_eq(ratelimit_limited(rl), 40000 - 5000);
	ratelimit_free(rl);
}

Test(ratelimit, shared_by_threads)
{
	two_threads_share(ratelimit_new(10, 5000, 64));
}

/* A table only one worker uses takes no lock (ratelimit_share): the same budget, the same
 * count of refusals; and shared again by two threads, exactly the burst between them. */
Test(ratelimit, one_thread_then_shared)
{
	struct ratelimit *rl = ratelimit_new(100, 20, 1024);
	cr_assert_not_null(rl);
	ratelimit_share(rl, 1);
	struct sockaddr_in c = v4("192.0.2.1");
	cr_expect_eq(allowed(rl, &c, 1000, 50), 20, "a burst of 20, then nothing");
	cr_expect_eq(allowed(rl, &c, 1100, 50), 10, "100 qps: 10 tokens after 100 ms");
	cr_expect_eq(ratelimit_limited(rl), 70, "every refusal counted without the lock");
	ratelimit_free(rl);

	rl = ratelimit_new(10, 5000, 64);
	ratelimit_share(rl, 1);
	ratelimit_share(rl, 2);
	two_threads_share(rl);
}

/* Regression (issue 12): a bucket taken over by a new owner started full, so two clients whose
 * addresses share a bucket got everything through by taking turns. With 16 buckets, 17 clients
 * must share one at least (pigeonhole); asked in turn at one instant, they get no more than 16
 * bursts in all, however many rounds. */
Test(ratelimit, colliding_clients_taking_turns_are_limited)
{
	struct ratelimit *rl = ratelimit_new(10, 2, 16);
	cr_assert_not_null(rl);
	struct sockaddr_in c[17];
	char a[32];
	for (int i = 0; i < 17; i++) {
		snprintf(a, sizeof(a), "198.51.100.%d", i + 1);
		c[i] = v4(a);
	}
	int ok = 0;
	for (int round = 0; round < 100; round++)
		for (int i = 0; i < 17; i++)
			ok += ratelimit_allow(rl, (const struct sockaddr *)&c[i], 5000);
	cr_expect_leq(ok, 16 * 2, "%d of 1700 allowed: a collision refilled a bucket", ok);
	ratelimit_free(rl);
}
