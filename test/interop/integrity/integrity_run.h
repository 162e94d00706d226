/* The integrity exchange's steps (integrity.h), once for both peers: each side gives its queue
 * pair's operations as a table and this runs the handshake, the six steps and the checks. */
#ifndef RIG_INTEGRITY_RUN_H
#define RIG_INTEGRITY_RUN_H

#include <stdlib.h>

#include "integrity.h"
#include "line_channel.h"

/* One side's queue pair. Offsets are into the side's own buffer (local) or the peer's (remote,
 * which the side turns into an address with the peer's region line). Each call answers 0, or
 * -1 with the reason in `why` (INTEGRITY_LINE bytes). wait_send waits for the oldest posted
 * WRITE, READ or SEND's completion; wait_receive for the oldest receive's, whose length must be
 * `bytes`. */
struct integrity_ops {
    void* self;
    uint8_t* buffer;  /* INTEGRITY_BUFFER bytes, registered */
    int (*post_write)(void* self, size_t local, size_t remote, uint32_t bytes, char* why);
    int (*post_read)(void* self, size_t remote, size_t local, uint32_t bytes, char* why);
    int (*post_send)(void* self, size_t local, uint32_t bytes, char* why);
    int (*post_receive)(void* self, size_t local, uint32_t capacity, char* why);
    int (*wait_send)(void* self, uint32_t bytes, char* why);
    int (*wait_receive)(void* self, uint32_t bytes, char* why);
};

static inline size_t integrity_at(int area, size_t k) { return (size_t)area * INTEGRITY_AREA + integrity_chunk_offset(k); }

/* The actor's part of step s: every chunk's operation posted, then every completion awaited. */
static inline int integrity_act(const struct integrity_ops* q, int step, char* why) {
    for (size_t k = 0; k < INTEGRITY_CHUNKS; ++k) {
        uint32_t n = integrity_chunk_sizes[k];
        int rc = step <= 2   ? q->post_write(q->self, integrity_at(AREA_R, k), integrity_at(AREA_W, k), n, why)
                 : step <= 4 ? q->post_read(q->self, integrity_at(AREA_R, k), integrity_at(AREA_L, k), n, why)
                             : q->post_send(q->self, integrity_at(AREA_R, k), n, why);
        if (rc != 0) return -1;
        /* a queue pair of a few dozen entries takes the whole step: wait as we go past 16 */
        if (k >= 16 && q->wait_send(q->self, integrity_chunk_sizes[k - 16], why) != 0) return -1;
    }
    for (size_t k = INTEGRITY_CHUNKS > 16 ? INTEGRITY_CHUNKS - 16 : 0; k < INTEGRITY_CHUNKS; ++k)
        if (q->wait_send(q->self, integrity_chunk_sizes[k], why) != 0) return -1;
    return 0;
}

static inline int integrity_prepare(const struct integrity_ops* q, int step, char* why) {
    if (step <= 4) return 0;
    for (size_t k = 0; k < INTEGRITY_CHUNKS; ++k)
        if (q->post_receive(q->self, integrity_at(AREA_S, k), integrity_chunk_sizes[k] + 64, why) != 0) return -1;
    return 0;
}

static inline int integrity_finish_passive(const struct integrity_ops* q, int step, char* why) {
    if (step > 4)
        for (size_t k = 0; k < INTEGRITY_CHUNKS; ++k)
            if (q->wait_receive(q->self, integrity_chunk_sizes[k], why) != 0) return -1;
    return 0;
}

/* Reads the peer's "<word> N ok|fail ..." line for step s into `why` when it failed. */
static inline int integrity_expect(struct line_channel* c, const char* word, int step, char* why) {
    char line[INTEGRITY_LINE], ok[INTEGRITY_LINE];
    if (channel_read(c, line) != 0) {
        snprintf(why, INTEGRITY_LINE, "step %d: %.200s", step, c->error);
        return -1;
    }
    snprintf(ok, sizeof ok, "%s %d ok", word, step);
    if (strcmp(line, ok) == 0) return 0;
    snprintf(why, INTEGRITY_LINE, "step %d: the peer says '%.200s'", step, line);
    return -1;
}

static inline int integrity_report(struct line_channel* c, const char* word, int step, int rc, const char* why) {
    char line[INTEGRITY_LINE];
    if (rc == 0) snprintf(line, sizeof line, "%s %d ok", word, step);
    else snprintf(line, sizeof line, "%s %d fail %.200s", word, step, why);
    return channel_write(c, line);
}

/* One step, either role. 0 when both sides said ok; else -1, `why` naming the first failure. */
static inline int integrity_step(struct line_channel* c, const struct integrity_ops* q, int is_server, int step, char* why) {
    char mine[INTEGRITY_LINE] = "";
    if (integrity_actor_is_server(step) == is_server) {
        if (integrity_expect(c, "ready", step, why) != 0) return -1;
        int rc = integrity_act(q, step, mine);
        if (rc == 0 && !integrity_check(q->buffer, is_server, step, mine)) rc = -1;
        if (integrity_report(c, "done", step, rc, mine) != 0) return snprintf(why, INTEGRITY_LINE, "%.240s", c->error), -1;
        if (rc != 0) return snprintf(why, INTEGRITY_LINE, "step %d: %.200s", step, mine), -1;
        return integrity_expect(c, "checked", step, why);
    }
    int rc = integrity_prepare(q, step, mine);
    if (integrity_report(c, "ready", step, rc, mine) != 0) return snprintf(why, INTEGRITY_LINE, "%.240s", c->error), -1;
    if (rc != 0) return snprintf(why, INTEGRITY_LINE, "step %d: %.200s", step, mine), -1;
    if (integrity_expect(c, "done", step, why) != 0) return -1;
    rc = integrity_finish_passive(q, step, mine);
    if (rc == 0 && !integrity_check(q->buffer, is_server, step, mine)) rc = -1;
    if (integrity_report(c, "checked", step, rc, mine) != 0) return snprintf(why, INTEGRITY_LINE, "%.240s", c->error), -1;
    return rc == 0 ? 0 : (snprintf(why, INTEGRITY_LINE, "step %d: %.200s", step, mine), -1);
}

/* The six steps and the goodbye; prints one line per step to stdout. */
static inline int integrity_steps(struct line_channel* c, const struct integrity_ops* q, int is_server, char* why) {
    static const char* names[] = {"", "client WRITE", "server WRITE", "client READ", "server READ", "client SEND", "server SEND"};
    for (int s = 1; s <= INTEGRITY_STEPS; ++s) {
        if (integrity_step(c, q, is_server, s, why) != 0) return -1;
        printf("integrity: step %d (%s, %zu messages) ok, every byte of both buffers checked\n", s, names[s], INTEGRITY_CHUNKS);
        fflush(stdout);
    }
    char line[INTEGRITY_LINE];
    if (!is_server && channel_write(c, "bye") != 0) return snprintf(why, INTEGRITY_LINE, "%.240s", c->error), -1;
    if (channel_read(c, line) != 0 || strcmp(line, "bye") != 0) return snprintf(why, INTEGRITY_LINE, "no goodbye: %.200s", c->error), -1;
    if (is_server && channel_write(c, "bye") != 0) return snprintf(why, INTEGRITY_LINE, "%.240s", c->error), -1;
    return 0;
}

/* The first two lines: both sides write theirs, then read the peer's. */
static inline int integrity_hello(struct line_channel* c, const char* endpoint_line, const char* region_line, char* peer_endpoint,
                                  unsigned long long* peer_addr, unsigned* peer_rkey, char* why) {
    char line[INTEGRITY_LINE];
    if (channel_write(c, endpoint_line) != 0 || channel_write(c, region_line) != 0 || channel_read(c, peer_endpoint) != 0 ||
        channel_read(c, line) != 0)
        return snprintf(why, INTEGRITY_LINE, "hello: %.200s", c->error), -1;
    if (sscanf(line, "region addr=0x%llx rkey=0x%x", peer_addr, peer_rkey) != 2)
        return snprintf(why, INTEGRITY_LINE, "hello: the peer's region line '%.150s' is not 'region addr=0x.. rkey=0x..'", line), -1;
    return 0;
}

#endif
