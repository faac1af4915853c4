/* dlist.h: the intrusive doubly linked list moatd and moat-fw keep their live objects on (so a
 * shutdown can find and close every one), and the one container_of that turns a link back into its
 * object. Header-only: no allocation, no locking; a list belongs to one thread. */
#ifndef MOAT_DLIST_H
#define MOAT_DLIST_H

#include <stddef.h>

struct dlist {
	struct dlist *prev, *next;
};

/* The object of type `type` whose member `member` is at `ptr`. */
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

static inline void dlist_init(struct dlist *l)
{
	l->prev = l->next = l;
}

static inline int dlist_empty(const struct dlist *l)
{
	return l->next == l;
}

static inline void dlist_add(struct dlist *head, struct dlist *n)
{
	n->next = head->next;
	n->prev = head;
	head->next->prev = n;
	head->next = n;
}

static inline void dlist_del(struct dlist *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

#endif
