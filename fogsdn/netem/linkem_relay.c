/* fogsdn link relay: splices two interfaces with delay, jitter, loss and a rate limit.
 *
 * Why: this machine kind's kernel has no netem, so a userspace element delays frames.
 * One process per link, one thread, both directions:
 *   - two AF_PACKET sockets (one per interface, PACKET_IGNORE_OUTGOING so that we never
 *     see our own transmissions, PACKET_VNET_HDR so that checksum-offload and GSO frames
 *     pass through unchanged, PACKET_QDISC_BYPASS on send);
 *   - per direction one FIFO (a byte ring) of frames stamped with their departure time
 *     (CLOCK_MONOTONIC); a timerfd armed at the earliest head departure (absolute time),
 *     early by the timer's usual lateness, the rest spun, so that frames leave on time;
 *   - parameters and counters in a shared control block (a file the caller mmaps):
 *     new parameters apply to the next frame that arrives, counters are live.
 * Semantics (docs/links.md): a frame arriving at time t (the kernel's receive timestamp)
 * in one direction is
 *   dropped if the link is down, or with probability `loss` (Bernoulli, seeded);
 *   else, with rate R: start = max(t, link_free); link_free = start + bits/R;
 *   (dropped if the frames waiting for the rate exceed queue_pkts full-size frames)
 *   departure = link_free (or t) + delay + U(-jitter, +jitter), clamped at >= t,
 *   then raised to the previous departure of that direction (FIFO: never reorders).
 * It exits when the parent closes the pipe passed as `parent_fd` (parent death, any
 * thread), when the control block says stop, or on SIGTERM.
 *
 * Per-peer table (optional; a control file longer than CTL_SIZE): side a is the table's
 * owner (a host), side b the network. Each frame also pays its peer's delay from the
 * table: the destination IPv4 address for frames a->b, the source for b->a (ARP: the
 * target and sender addresses); a peer not in the table, or a non-IP frame, pays none.
 * Order is then kept per peer (a frame leaves no earlier than the previous frame of
 * that peer and direction), not per direction: frames wait in a heap ordered by
 * departure (ties in arrival order), so a near peer's frame never waits behind a far
 * one's. The table has its own seqlock; a new table applies to the next frame.
 *
 * usage: linkem_relay CTL_FILE IF_A IF_B NETNS_A|- NETNS_B|- SEED PARENT_FD [RT_PRIORITY]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define CTL_MAGIC 0x666f67736c6e6b31ULL /* "fogslnk1" */
#define CTL_SIZE 512
#define BATCH 64
#define FRAME_MAX (65536 + 256)
#define RING_BYTES (8u << 20) /* per direction: 64 ms at 1 Gbit/s; more is dropped */
#define FULL_FRAME 1514u
#define VNET_LEN ((uint32_t)sizeof(struct virtio_net_hdr))

enum { C_RX_PKTS, C_RX_BYTES, C_TX_PKTS, C_TX_BYTES, C_DROP_LOSS, C_DROP_DOWN, C_DROP_QUEUE,
       C_DROP_ERROR, C_COUNT };

/* Layout shared with topologies/linkem.py (ControlBlock): 64-bit little-endian words. */
struct ctl {
    uint64_t magic;        /* 0 */
    uint64_t version;      /* 8: seqlock, odd while the writer is writing */
    int64_t delay_ns;      /* 16 */
    int64_t jitter_ns;     /* 24 */
    uint64_t loss_x32;     /* 32: drop if rand32 < loss_x32 (2^32 = always) */
    uint64_t rate_bps;     /* 40: 0 = unlimited */
    uint64_t queue_pkts;   /* 48 */
    uint64_t up;           /* 56 */
    uint64_t stop;         /* 64 */
    uint64_t ready;        /* 72: set by the relay once both sockets are bound */
    uint64_t table_cap;    /* 80: entries the file holds after CTL_SIZE (0: no table) */
    uint64_t table_len;    /* 88: entries in use */
    uint64_t table_version; /* 96: the table's seqlock, odd while the writer is writing */
    uint64_t pad[3];       /* 104..127 */
    uint64_t counters[2][C_COUNT]; /* 128: [direction a->b, b->a][counter] */
};

struct params {
    int64_t delay_ns, jitter_ns;
    uint64_t loss_x32, rate_bps, queue_pkts, up;
};

struct rec {
    uint64_t depart;
    uint32_t len; /* bytes of data after the header (vnet header + frame); WRAP marks a wrap */
    uint32_t pad;
};
#define WRAP 0xffffffffu
#define REC_ALIGN(n) (((n) + 15u) & ~(size_t)15u)

struct ring {
    uint8_t *buf;
    size_t size, head, tail, count;
};

/* One table entry in the control file (after CTL_SIZE): the peer's IPv4 address as
 * its four bytes on the wire read as one native word, and its one-way delay. */
struct table_entry {
    uint32_t ip;
    uint32_t pad;
    int64_t delay_ns;
};

/* ---- heap of frames ordered by departure (table mode): order per peer, not per
 * direction ---- */
struct hrec {
    uint64_t depart, seq;
    uint8_t *data;
    uint32_t len;
};

struct heap {
    struct hrec *a;
    size_t n, cap, bytes;
    uint64_t seq;
};

struct direction {
    int rx_fd, tx_fd;
    struct ring ring;
    struct heap heap;
    uint64_t link_free, last_depart;
    uint64_t *counters;
    int index; /* 0: a->b, 1: b->a */
};

/* The relay's own copy of the table: open addressing, keyed by address; an entry stays
 * (not live) when a new table drops its peer, so that the peer's order is kept. */
struct peer {
    uint32_t ip;
    uint8_t used, live;
    int64_t delay_ns;
    uint64_t last_depart[2];
};
static struct peer *peers, other_peer; /* other_peer: not in the table, or not IP */
static size_t peers_mask, peers_used;
static uint64_t table_seen = 1; /* odd: nothing copied yet */
static int table_mode;

static volatile sig_atomic_t terminate;
static uint64_t rng_state;
/* Timer wake-ups arrive late (about 50 us here, in a VM). We arm the timer that much early
 * (an average of the lateness seen) and spin the rest, so frames leave on time, not late. */
#define SPIN_MAX_NS 200000
static int64_t late_est_ns = 50000;

static void on_term(int sig) { (void)sig; terminate = 1; }

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t splitmix64(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void die(const char *what) {
    fprintf(stderr, "linkem_relay: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void read_params(volatile struct ctl *c, struct params *p) {
    for (;;) {
        uint64_t v1 = __atomic_load_n(&c->version, __ATOMIC_ACQUIRE);
        if (v1 & 1) continue;
        p->delay_ns = c->delay_ns;
        p->jitter_ns = c->jitter_ns;
        p->loss_x32 = c->loss_x32;
        p->rate_bps = c->rate_bps;
        p->queue_pkts = c->queue_pkts;
        p->up = c->up;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&c->version, __ATOMIC_ACQUIRE) == v1) return;
    }
}

static void bump(uint64_t *counter, uint64_t by) {
    __atomic_store_n(counter, *counter + by, __ATOMIC_RELAXED);
}

/* ---- byte ring of records: FIFO, variable-size frames ---- */

static struct rec *ring_push(struct ring *r, uint32_t len) {
    size_t need = sizeof(struct rec) + REC_ALIGN(len);
    size_t at;
    if (r->count == 0) r->head = r->tail = 0;
    if (r->count > 0 && r->tail == r->head) return NULL; /* full */
    if (r->tail >= r->head) {
        if (r->size - r->tail >= need) {
            at = r->tail;
        } else if (r->head > need) {
            if (r->size - r->tail >= sizeof(struct rec))
                ((struct rec *)(r->buf + r->tail))->len = WRAP;
            at = 0;
        } else {
            return NULL;
        }
    } else if (r->head - r->tail >= need) {
        at = r->tail;
    } else {
        return NULL;
    }
    r->tail = at + need;
    if (r->tail == r->size) r->tail = 0;
    r->count++;
    struct rec *rec = (struct rec *)(r->buf + at);
    rec->len = len;
    return rec;
}

static struct rec *ring_at(struct ring *r, size_t *pos) {
    if (r->size - *pos < sizeof(struct rec) || ((struct rec *)(r->buf + *pos))->len == WRAP)
        *pos = 0;
    return (struct rec *)(r->buf + *pos);
}

static void ring_pop(struct ring *r) {
    size_t pos = r->head;
    struct rec *rec = ring_at(r, &pos);
    r->head = pos + sizeof(struct rec) + REC_ALIGN(rec->len);
    if (r->head == r->size) r->head = 0;
    if (--r->count == 0) r->head = r->tail = 0;
}

static int heap_less(const struct hrec *x, const struct hrec *y) {
    return x->depart < y->depart || (x->depart == y->depart && x->seq < y->seq);
}

static int heap_push(struct heap *h, uint64_t depart, const uint8_t *data, uint32_t len) {
    if (h->bytes + len > RING_BYTES) return 0;
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 256;
        struct hrec *a = realloc(h->a, cap * sizeof *a);
        if (!a) return 0;
        h->a = a;
        h->cap = cap;
    }
    uint8_t *copy = malloc(len);
    if (!copy) return 0;
    memcpy(copy, data, len);
    struct hrec r = {.depart = depart, .seq = h->seq++, .data = copy, .len = len};
    size_t i = h->n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!heap_less(&r, &h->a[up])) break;
        h->a[i] = h->a[up];
        i = up;
    }
    h->a[i] = r;
    h->bytes += len;
    return 1;
}

static struct hrec heap_pop(struct heap *h) {
    struct hrec top = h->a[0], last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = l;
        if (l >= h->n) break;
        if (l + 1 < h->n && heap_less(&h->a[l + 1], &h->a[l])) m = l + 1;
        if (!heap_less(&h->a[m], &last)) break;
        h->a[i] = h->a[m];
        i = m;
    }
    if (h->n) h->a[i] = last;
    h->bytes -= top.len;
    return top;
}

static struct peer *peer_slot(uint32_t ip, int insert) {
    size_t i = (size_t)((ip * 2654435761u) >> 7) & peers_mask;
    for (;; i = (i + 1) & peers_mask) {
        if (!peers[i].used) {
            if (!insert || 2 * (peers_used + 1) > peers_mask + 1) return NULL; /* kept half empty */
            peers_used++;
            peers[i].used = 1;
            peers[i].ip = ip;
            return &peers[i];
        }
        if (peers[i].ip == ip) return &peers[i];
    }
}

/* Copy the control block's table when its seqlock says it changed (and is whole). */
static void refresh_table(volatile struct ctl *c) {
    uint64_t v1 = __atomic_load_n(&c->table_version, __ATOMIC_ACQUIRE);
    if (v1 == table_seen || (v1 & 1)) return;
    static struct table_entry *tmp;
    uint64_t cap = c->table_cap;
    if (!tmp) tmp = malloc(cap * sizeof *tmp);
    uint64_t len = c->table_len;
    if (len > cap) len = cap;
    memcpy(tmp, (const void *)((const volatile uint8_t *)c + CTL_SIZE), len * sizeof *tmp);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&c->table_version, __ATOMIC_ACQUIRE) != v1) return; /* next time */
    for (size_t i = 0; i <= peers_mask; i++) peers[i].live = 0;
    for (uint64_t i = 0; i < len; i++) {
        struct peer *pe = peer_slot(tmp[i].ip, 1);
        if (!pe) break; /* more distinct peers than the table holds: the rest pay none */
        pe->live = 1;
        pe->delay_ns = tmp[i].delay_ns;
    }
    table_seen = v1;
}

/* The frame's peer (dir 0, a->b: its destination; dir 1: its source), or other_peer. */
static struct peer *frame_peer(const uint8_t *frame, uint32_t len, int dir) {
    if (len < 14) return &other_peer;
    uint32_t off = 12;
    uint16_t type = (uint16_t)(frame[off] << 8 | frame[off + 1]);
    if (type == 0x8100 && len >= 18) {
        off += 4;
        type = (uint16_t)(frame[off] << 8 | frame[off + 1]);
    }
    uint32_t l3 = off + 2, at;
    if (type == 0x0800) at = l3 + (dir == 0 ? 16 : 12);
    else if (type == 0x0806) at = l3 + (dir == 0 ? 24 : 14);
    else return &other_peer;
    if (len < at + 4) return &other_peer;
    uint32_t ip;
    memcpy(&ip, frame + at, 4);
    struct peer *pe = peer_slot(ip, 0);
    return pe && pe->live ? pe : &other_peer;
}

/* ---- sockets ---- */

static int enter_netns(const char *name) {
    if (strcmp(name, "-") == 0) return 0;
    char path[512];
    snprintf(path, sizeof path, "/var/run/netns/%s", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) die(path);
    if (setns(fd, CLONE_NEWNET) < 0) die("setns");
    close(fd);
    return 1;
}

static int open_packet_socket(const char *ifname, const char *netns, int home_ns) {
    int entered = enter_netns(netns);
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    if (fd < 0) die("socket(AF_PACKET)");
    int one = 1, big = 8 << 20;
    if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) < 0) die("PACKET_VNET_HDR");
    if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) < 0)
        die("PACKET_IGNORE_OUTGOING");
    if (setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one) < 0)
        die("PACKET_QDISC_BYPASS");
    if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) < 0) die("SO_TIMESTAMPNS");
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big) < 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    unsigned idx = if_nametoindex(ifname);
    if (idx == 0) {
        fprintf(stderr, "linkem_relay: no interface %s%s%s\n", ifname,
                entered ? " in netns " : "", entered ? netns : "");
        exit(1);
    }
    struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
                              .sll_ifindex = (int)idx};
    if (bind(fd, (struct sockaddr *)&sll, sizeof sll) < 0) die("bind");
    if (entered && setns(home_ns, CLONE_NEWNET) < 0) die("setns back");
    return fd;
}

/* CLOCK_REALTIME minus CLOCK_MONOTONIC, read between two monotonic reads; of a few tries the
 * tightest pair wins. A preemption between two plain reads (0.1 ms under steal, seen in CI)
 * would shift every arrival stamp of the batch early by that much, and the frame would
 * leave before its delay was up. `*t_mono` gets the latest monotonic read. */
static int64_t realtime_offset(uint64_t *t_mono) {
    int64_t best = 0;
    uint64_t best_gap = UINT64_MAX;
    for (int i = 0; i < 4 && best_gap > 2000; i++) {
        struct timespec rt;
        uint64_t m1 = now_ns();
        clock_gettime(CLOCK_REALTIME, &rt);
        uint64_t m2 = now_ns();
        *t_mono = m2;
        if (m2 - m1 < best_gap) {
            best_gap = m2 - m1;
            best = (int64_t)rt.tv_sec * 1000000000ll + rt.tv_nsec - (int64_t)(m1 + (m2 - m1) / 2);
        }
    }
    return best;
}

/* ---- the two halves of the loop ---- */

static uint8_t *rx_bufs;

/* When the kernel received the frame (SO_TIMESTAMPNS, CLOCK_REALTIME), on CLOCK_MONOTONIC:
 * the delay counts from there, not from when the relay woke up to read it. */
static uint64_t arrival_ns(struct msghdr *m, uint64_t t_mono, int64_t real_minus_mono) {
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(m); cm; cm = CMSG_NXTHDR(m, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SO_TIMESTAMPNS) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(cm), sizeof ts);
            int64_t real = (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
            int64_t mono = real - real_minus_mono;
            /* trust it only if plausible (not ahead of now, not older than 100 ms) */
            if (mono > 0 && (uint64_t)mono <= t_mono && t_mono - (uint64_t)mono < 100000000ull)
                return (uint64_t)mono;
        }
    }
    return t_mono;
}

static void receive(struct direction *d, volatile struct ctl *c) {
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    static char cbuf[BATCH][CMSG_SPACE(sizeof(struct timespec)) + 64];
    for (;;) {
        for (int i = 0; i < BATCH; i++) {
            iov[i].iov_base = rx_bufs + (size_t)i * FRAME_MAX;
            iov[i].iov_len = FRAME_MAX;
            memset(&msgs[i].msg_hdr, 0, sizeof msgs[i].msg_hdr);
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_control = cbuf[i];
            msgs[i].msg_hdr.msg_controllen = sizeof cbuf[i];
        }
        int n = recvmmsg(d->rx_fd, msgs, BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0) return; /* EAGAIN, or ENETDOWN while the interface is down */
        struct params p;
        read_params(c, &p);
        if (table_mode) refresh_table(c);
        uint64_t t;
        int64_t real_minus_mono = realtime_offset(&t);
        for (int i = 0; i < n; i++) {
            uint32_t len = msgs[i].msg_len;
            uint64_t arrived = arrival_ns(&msgs[i].msg_hdr, t, real_minus_mono);
            if (len <= VNET_LEN || (msgs[i].msg_hdr.msg_flags & MSG_TRUNC)) {
                bump(&d->counters[C_DROP_ERROR], 1);
                continue;
            }
            uint32_t wire = len - VNET_LEN;
            bump(&d->counters[C_RX_PKTS], 1);
            bump(&d->counters[C_RX_BYTES], wire);
            if (!p.up) {
                bump(&d->counters[C_DROP_DOWN], 1);
                continue;
            }
            if (p.loss_x32 && (splitmix64() >> 32) < p.loss_x32) {
                bump(&d->counters[C_DROP_LOSS], 1);
                continue;
            }
            uint64_t ready = arrived;
            if (p.rate_bps) {
                uint64_t start = d->link_free > arrived ? d->link_free : arrived;
                uint64_t backlog_bytes =
                    (uint64_t)((double)(start - arrived) * p.rate_bps / 8e9);
                if (backlog_bytes + wire > p.queue_pkts * FULL_FRAME) {
                    bump(&d->counters[C_DROP_QUEUE], 1);
                    continue;
                }
                d->link_free = start + (uint64_t)((double)wire * 8e9 / p.rate_bps);
                ready = d->link_free;
            }
            int64_t delay = p.delay_ns;
            if (p.jitter_ns > 0) {
                double u = (double)(splitmix64() >> 11) * (1.0 / 9007199254740992.0);
                delay += (int64_t)((2.0 * u - 1.0) * (double)p.jitter_ns);
                if (delay < 0) delay = 0;
            }
            if (table_mode) {
                int dir = d->index;
                struct peer *pe = frame_peer((uint8_t *)iov[i].iov_base + VNET_LEN, wire, dir);
                uint64_t depart = ready + (uint64_t)delay + (uint64_t)pe->delay_ns;
                if (depart < pe->last_depart[dir]) depart = pe->last_depart[dir];
                if (!heap_push(&d->heap, depart, iov[i].iov_base, len)) {
                    bump(&d->counters[C_DROP_QUEUE], 1);
                    continue;
                }
                pe->last_depart[dir] = depart;
                continue;
            }
            uint64_t depart = ready + (uint64_t)delay;
            if (depart < d->last_depart) depart = d->last_depart;
            struct rec *r = ring_push(&d->ring, len);
            if (!r) {
                bump(&d->counters[C_DROP_QUEUE], 1);
                continue;
            }
            r->depart = depart;
            d->last_depart = depart;
            memcpy((uint8_t *)(r + 1), iov[i].iov_base, len);
        }
        if (n < BATCH) return;
    }
}

/* Table mode: send every frame whose departure has come, earliest first. */
static uint64_t transmit_heap(struct direction *d, volatile struct ctl *c) {
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    struct hrec out[BATCH];
    for (;;) {
        uint64_t t = now_ns();
        int n = 0;
        while (d->heap.n > 0 && n < BATCH) {
            uint64_t dep = d->heap.a[0].depart;
            if (dep > t && n == 0 && dep - t <= (uint64_t)late_est_ns + 10000) {
                while ((t = now_ns()) < dep) { /* spin: at most late_est + 10 us */ }
            }
            if (dep > t) break;
            out[n] = heap_pop(&d->heap);
            iov[n].iov_base = out[n].data;
            iov[n].iov_len = out[n].len;
            memset(&msgs[n].msg_hdr, 0, sizeof msgs[n].msg_hdr);
            msgs[n].msg_hdr.msg_iov = &iov[n];
            msgs[n].msg_hdr.msg_iovlen = 1;
            n++;
        }
        if (n == 0) return d->heap.n ? d->heap.a[0].depart : 0;
        struct params p;
        read_params(c, &p);
        int done = 0;
        while (done < n) {
            if (!p.up) {
                for (; done < n; done++) bump(&d->counters[C_DROP_DOWN], 1);
                break;
            }
            int k = sendmmsg(d->tx_fd, msgs + done, (unsigned)(n - done), 0);
            if (k < 0) {
                if (errno == EINTR) continue;
                bump(&d->counters[C_DROP_ERROR], 1);
                done++;
                continue;
            }
            for (int i = 0; i < k; i++) {
                bump(&d->counters[C_TX_PKTS], 1);
                bump(&d->counters[C_TX_BYTES], msgs[done + i].msg_len - VNET_LEN);
            }
            done += k;
        }
        for (int i = 0; i < n; i++) free(out[i].data);
    }
}

/* Send every frame whose departure time has come; returns the next departure (0: none). */
static uint64_t transmit(struct direction *d, volatile struct ctl *c) {
    if (table_mode) return transmit_heap(d, c);
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    for (;;) {
        uint64_t t = now_ns();
        int n = 0;
        size_t pos = d->ring.head;
        while ((size_t)n < d->ring.count && n < BATCH) {
            struct rec *r = ring_at(&d->ring, &pos);
            if (r->depart > t && n == 0 && r->depart - t <= (uint64_t)late_est_ns + 10000) {
                while ((t = now_ns()) < r->depart) { /* spin: at most late_est + 10 us */ }
            }
            if (r->depart > t) break;
            iov[n].iov_base = (uint8_t *)(r + 1);
            iov[n].iov_len = r->len;
            memset(&msgs[n].msg_hdr, 0, sizeof msgs[n].msg_hdr);
            msgs[n].msg_hdr.msg_iov = &iov[n];
            msgs[n].msg_hdr.msg_iovlen = 1;
            pos += sizeof(struct rec) + REC_ALIGN(r->len);
            n++;
        }
        if (n == 0) {
            if (d->ring.count == 0) return 0;
            size_t h = d->ring.head;
            return ring_at(&d->ring, &h)->depart;
        }
        struct params p;
        read_params(c, &p);
        int done = 0;
        while (done < n) {
            if (!p.up) { /* frames in flight when the link went down are lost */
                for (; done < n; done++) {
                    bump(&d->counters[C_DROP_DOWN], 1);
                    ring_pop(&d->ring);
                }
                break;
            }
            int k = sendmmsg(d->tx_fd, msgs + done, (unsigned)(n - done), 0);
            if (k < 0) {
                if (errno == EINTR) continue;
                bump(&d->counters[C_DROP_ERROR], 1); /* ENOBUFS, ENETDOWN: that frame is lost */
                ring_pop(&d->ring);
                done++;
                continue;
            }
            for (int i = 0; i < k; i++) {
                bump(&d->counters[C_TX_PKTS], 1);
                bump(&d->counters[C_TX_BYTES], msgs[done + i].msg_len - VNET_LEN);
                ring_pop(&d->ring);
            }
            done += k;
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 8 && argc != 9) {
        fprintf(stderr, "usage: %s CTL_FILE IF_A IF_B NETNS_A|- NETNS_B|- SEED PARENT_FD "
                "[RT_PRIORITY]\n", argv[0]);
        return 2;
    }
    if (argc == 9 && atoi(argv[8]) > 0) {
        /* SCHED_FIFO: woken at once when a frame or the timer comes, even on a busy machine
         * (the relay sleeps between frames; the kernel's RT throttling bounds it anyway) */
        struct sched_param sp = {.sched_priority = atoi(argv[8])};
        if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
            fprintf(stderr, "linkem_relay: SCHED_FIFO not granted (%s); running without\n",
                    strerror(errno));
    }
    int parent_fd = atoi(argv[7]);
    rng_state = strtoull(argv[6], NULL, 10);
    prctl(PR_SET_TIMERSLACK, 1UL); /* wake-ups on time, not up to 50 us late */
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    signal(SIGPIPE, SIG_IGN);

    int cfd = open(argv[1], O_RDWR | O_CLOEXEC);
    if (cfd < 0) die(argv[1]);
    off_t file_size = lseek(cfd, 0, SEEK_END);
    size_t map_size = file_size > CTL_SIZE ? (size_t)file_size : CTL_SIZE;
    volatile struct ctl *c = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_SHARED, cfd, 0);
    if (c == MAP_FAILED) die("mmap");
    if (c->magic != CTL_MAGIC) {
        fprintf(stderr, "linkem_relay: %s is not a control block\n", argv[1]);
        return 1;
    }
    if (c->table_cap) {
        if ((size_t)file_size < CTL_SIZE + c->table_cap * sizeof(struct table_entry)) {
            fprintf(stderr, "linkem_relay: %s is too short for its table\n", argv[1]);
            return 1;
        }
        size_t slots = 16;
        while (slots < 2 * c->table_cap) slots *= 2;
        peers = calloc(slots, sizeof *peers);
        if (!peers) die("calloc");
        peers_mask = slots - 1;
        table_mode = 1;
        refresh_table(c);
    }
    int home_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (home_ns < 0) die("/proc/self/ns/net");
    int fd_a = open_packet_socket(argv[2], argv[4], home_ns);
    int fd_b = open_packet_socket(argv[3], argv[5], home_ns);

    rx_bufs = malloc((size_t)BATCH * FRAME_MAX);
    struct direction dirs[2] = {
        {.rx_fd = fd_a, .tx_fd = fd_b, .counters = (uint64_t *)c->counters[0]},
        {.rx_fd = fd_b, .tx_fd = fd_a, .counters = (uint64_t *)c->counters[1], .index = 1},
    };
    for (int i = 0; i < 2; i++) {
        dirs[i].ring.size = RING_BYTES;
        dirs[i].ring.buf = malloc(RING_BYTES);
        if (!dirs[i].ring.buf || !rx_bufs) die("malloc");
    }
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (tfd < 0 || ep < 0) die("timerfd/epoll");
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.u32 = 0; epoll_ctl(ep, EPOLL_CTL_ADD, fd_a, &ev);
    ev.data.u32 = 1; epoll_ctl(ep, EPOLL_CTL_ADD, fd_b, &ev);
    ev.data.u32 = 2; epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
    ev.data.u32 = 3;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, parent_fd, &ev) < 0) die("parent pipe");
    __atomic_store_n(&c->ready, 1, __ATOMIC_RELEASE);

    uint64_t armed = 0, armed_at = 0;
    while (!terminate && !c->stop) {
        struct epoll_event evs[8];
        int n = epoll_wait(ep, evs, 8, 500);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int i = 0; i < n; i++) {
            uint32_t what = evs[i].data.u32;
            if (what == 3) return 0; /* the parent is gone (pipe closed) */
            if (what == 2) {
                uint64_t expirations;
                if (read(tfd, &expirations, sizeof expirations) < 0) { /* spurious */ }
                int64_t late = (int64_t)(now_ns() - armed_at);
                if (late > SPIN_MAX_NS) late = SPIN_MAX_NS; /* preempted: not the timer's fault */
                if (late < 0) late = 0;
                late_est_ns += (late - late_est_ns) / 8;
                armed = 0;
            } else {
                receive(&dirs[what], c);
            }
        }
        uint64_t next = 0;
        for (int i = 0; i < 2; i++) {
            uint64_t t = transmit(&dirs[i], c);
            if (t && (!next || t < next)) next = t;
        }
        if (next && next != armed) {
            struct itimerspec its = {0};
            uint64_t at = next - (uint64_t)late_est_ns, t = now_ns();
            if (at <= t) at = t + 1;
            its.it_value.tv_sec = (time_t)(at / 1000000000ull);
            its.it_value.tv_nsec = (long)(at % 1000000000ull);
            armed_at = at;
            timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
            armed = next;
        }
    }
    return 0;
}
