/*
 * netimpair: a network impairment for tests on kernels without sch_netem.
 *
 * iptables hands the packets to impair to an NFQUEUE (scripts/impair installs the rule); this
 * program holds each one and gives its verdict later, so a packet leaves after
 *   delay + jitter * N(0,1)            (clamped at 0; independent per packet, so jitter reorders)
 * or is dropped with probability --loss. With --reorder P, a share P of the packets skips the
 * delay and overtakes the ones held (netem's "reorder" without correlation). With --rate, the
 * link serialises packets at that rate after their delay (a queue builds; --limit packets at
 * most, beyond which arrivals are dropped, as netem's limit does).
 *
 * SIGINT/SIGTERM release every held packet and exit 0. With --stats FILE, the counts are written
 * there as one JSON object at exit.
 *
 * Build: gcc -O2 -o netimpair netimpair.c -lnetfilter_queue   (libnetfilter-queue-dev)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <arpa/inet.h>
#include <getopt.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <libnfnetlink/libnfnetlink.h>
#include <linux/netfilter.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct held {
    uint64_t release_ns;
    uint64_t order;      /* arrival order: ties leave in the order they came */
    uint32_t id;
};

static struct held *heap;
static size_t heap_count, heap_capacity;

static double delay_ms, jitter_ms, loss_pct, reorder_pct, rate_kbit;
static long limit = 1000;
static uint64_t link_free_ns, arrivals;
static unsigned long long n_received, n_dropped_loss, n_dropped_limit, n_reordered, n_accepted;
static volatile sig_atomic_t stopping;
static struct nfq_q_handle *queue;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int earlier(const struct held *a, const struct held *b) {
    return a->release_ns < b->release_ns || (a->release_ns == b->release_ns && a->order < b->order);
}

static void heap_push(struct held h) {
    size_t i = heap_count++;
    heap[i] = h;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!earlier(&heap[i], &heap[parent])) break;
        struct held t = heap[i]; heap[i] = heap[parent]; heap[parent] = t;
        i = parent;
    }
}

static struct held heap_pop(void) {
    struct held top = heap[0];
    heap[0] = heap[--heap_count];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < heap_count && earlier(&heap[l], &heap[m])) m = l;
        if (r < heap_count && earlier(&heap[r], &heap[m])) m = r;
        if (m == i) break;
        struct held t = heap[i]; heap[i] = heap[m]; heap[m] = t;
        i = m;
    }
    return top;
}

static double uniform(void) { return drand48(); }

static double normal(void) {
    /* Box–Muller; u1 in (0, 1] so the log is finite. */
    double u1 = 1.0 - drand48(), u2 = drand48();
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

static void verdict(uint32_t id, uint32_t what) {
    if (nfq_set_verdict(queue, id, what, 0, NULL) < 0) perror("netimpair: nfq_set_verdict");
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa, void *data) {
    (void)qh; (void)msg; (void)data;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (!ph) return 0;
    uint32_t id = ntohl(ph->packet_id);
    unsigned char *payload;
    int length = nfq_get_payload(nfa, &payload);
    if (length < 0) length = 0;
    n_received++;

    if (loss_pct > 0 && uniform() * 100.0 < loss_pct) {
        n_dropped_loss++;
        verdict(id, NF_DROP);
        return 0;
    }
    if ((long)heap_count >= limit || heap_count >= heap_capacity) {
        n_dropped_limit++;
        verdict(id, NF_DROP);
        return 0;
    }
    uint64_t now = now_ns();
    double wait_ms = delay_ms + (jitter_ms > 0 ? jitter_ms * normal() : 0);
    if (reorder_pct > 0 && delay_ms > 0 && uniform() * 100.0 < reorder_pct) {
        wait_ms = 0;
        n_reordered++;
    }
    if (wait_ms < 0) wait_ms = 0;
    uint64_t release = now + (uint64_t)(wait_ms * 1e6);
    if (rate_kbit > 0) {
        uint64_t start = release > link_free_ns ? release : link_free_ns;
        link_free_ns = start + (uint64_t)((double)length * 8.0 * 1e6 / rate_kbit);
        release = link_free_ns;
    }
    if (release <= now && heap_count == 0) {
        n_accepted++;
        verdict(id, NF_ACCEPT);
        return 0;
    }
    heap_push((struct held){ .release_ns = release, .order = arrivals++, .id = id });
    return 0;
}

static void on_signal(int sig) { (void)sig; stopping = 1; }

static void usage(void) {
    fprintf(stderr,
            "usage: netimpair [--queue N] [--delay-ms MS] [--jitter-ms MS] [--loss PCT] [--reorder PCT]\n"
            "                 [--rate-kbit KBIT] [--limit PACKETS] [--seed N] [--stats FILE]\n"
            "Holds the packets iptables queues to NFQUEUE N (see scripts/impair) and releases them late,\n"
            "drops, reorders or rate-limits them as asked. SIGINT/SIGTERM release everything and exit.\n");
    exit(2);
}

int main(int argc, char **argv) {
    int queue_num = 0;
    long seed = (long)time(NULL);
    const char *stats_path = NULL;
    static struct option options[] = {
        {"queue", required_argument, 0, 'q'}, {"delay-ms", required_argument, 0, 'd'},
        {"jitter-ms", required_argument, 0, 'j'}, {"loss", required_argument, 0, 'l'},
        {"reorder", required_argument, 0, 'r'}, {"rate-kbit", required_argument, 0, 'R'},
        {"limit", required_argument, 0, 'L'}, {"seed", required_argument, 0, 's'},
        {"stats", required_argument, 0, 'S'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c, which = 0;
    while ((c = getopt_long(argc, argv, "", options, &which)) != -1) {
        char *end = NULL;
        double value = optarg ? strtod(optarg, &end) : 0;
        if (optarg && c != 'S' && (end == optarg || *end != '\0' || value < 0)) {
            fprintf(stderr, "netimpair: --%s wants a non-negative number, not \"%s\"\n", options[which].name, optarg);
            usage();
        }
        switch (c) {
        case 'q': queue_num = (int)value; break;
        case 'd': delay_ms = value; break;
        case 'j': jitter_ms = value; break;
        case 'l': loss_pct = value; break;
        case 'r': reorder_pct = value; break;
        case 'R': rate_kbit = value; break;
        case 'L': limit = (long)value; break;
        case 's': seed = (long)value; break;
        case 'S': stats_path = optarg; break;
        default: usage();
        }
    }
    if (optind != argc || loss_pct > 100 || reorder_pct > 100 || limit < 1) usage();
    srand48(seed);
    heap_capacity = (size_t)limit + 1;
    heap = calloc(heap_capacity, sizeof *heap);
    if (!heap) { perror("netimpair: calloc"); return 1; }

    struct nfq_handle *h = nfq_open();
    if (!h) { perror("netimpair: nfq_open (needs root / CAP_NET_ADMIN and the nfnetlink_queue module)"); return 1; }
    queue = nfq_create_queue(h, (uint16_t)queue_num, &on_packet, NULL);
    if (!queue) { fprintf(stderr, "netimpair: cannot bind NFQUEUE %d: %s (another program holds it?)\n", queue_num, strerror(errno)); return 1; }
    if (nfq_set_mode(queue, NFQNL_COPY_PACKET, 0xffff) < 0) { perror("netimpair: nfq_set_mode"); return 1; }
    nfq_set_queue_maxlen(queue, (uint32_t)(limit * 4 + 1024));
    /* A burst arrives faster than a busy machine schedules us: room for it in the netlink socket
       (else the kernel drops packets with ENOBUFS before netimpair sees them). */
    nfnl_rcvbufsiz(nfq_nfnlh(h), 16u << 20);
    int fd = nfq_fd(h);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* A parent may have started us with these blocked (Foundation's Process does): unblock. */
    sigset_t unblock;
    sigemptyset(&unblock);
    sigaddset(&unblock, SIGINT);
    sigaddset(&unblock, SIGTERM);
    sigprocmask(SIG_UNBLOCK, &unblock, NULL);
    signal(SIGPIPE, SIG_IGN);

    char buffer[0x10000 + 4096] __attribute__((aligned));
    fprintf(stderr, "netimpair: queue %d: delay %.1f ms, jitter %.1f ms, loss %.2f %%, reorder %.2f %%, rate %s%.0f kbit/s, limit %ld\n",
            queue_num, delay_ms, jitter_ms, loss_pct, reorder_pct, rate_kbit > 0 ? "" : "unlimited ", rate_kbit, limit);
    while (!stopping) {
        struct timespec timeout = {1, 0};
        if (heap_count > 0) {
            uint64_t now = now_ns();
            uint64_t wait = heap[0].release_ns > now ? heap[0].release_ns - now : 0;
            timeout.tv_sec = (time_t)(wait / 1000000000ull);
            timeout.tv_nsec = (long)(wait % 1000000000ull);
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int ready = ppoll(&pfd, 1, &timeout, NULL);
        if (ready < 0 && errno != EINTR) { perror("netimpair: ppoll"); break; }
        if (ready > 0) {
            for (;;) {
                ssize_t n = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
                if (n < 0) {
                    if (errno == ENOBUFS) { fprintf(stderr, "netimpair: the kernel dropped queued packets (ENOBUFS)\n"); continue; }
                    break;
                }
                nfq_handle_packet(h, buffer, (int)n);
            }
        }
        uint64_t now = now_ns();
        while (heap_count > 0 && heap[0].release_ns <= now) {
            struct held due = heap_pop();
            n_accepted++;
            verdict(due.id, NF_ACCEPT);
        }
    }
    while (heap_count > 0) {
        struct held due = heap_pop();
        n_accepted++;
        verdict(due.id, NF_ACCEPT);
    }
    nfq_destroy_queue(queue);
    nfq_close(h);
    if (stats_path) {
        FILE *f = fopen(stats_path, "w");
        if (f) {
            fprintf(f, "{\"received\":%llu,\"accepted\":%llu,\"dropped_loss\":%llu,\"dropped_limit\":%llu,\"reordered\":%llu}\n",
                    n_received, n_accepted, n_dropped_loss, n_dropped_limit, n_reordered);
            fclose(f);
        } else {
            fprintf(stderr, "netimpair: cannot write %s: %s\n", stats_path, strerror(errno));
        }
    }
    return 0;
}
