/* The data-integrity exchange between a Rig queue pair (rig-peer.cpp) and a libibverbs one
 * (verbs-peer.c, on Linux Soft-RoCE in the interop guest): one source of truth for both sides,
 * in C so that the verbs program needs nothing but libibverbs (issue 16: "perftest does not
 * check bytes, so the suite also runs a small verbs program of its own").
 *
 * Each side registers one buffer of INTEGRITY_BUFFER bytes in four areas of INTEGRITY_AREA bytes:
 *   W (target of the peer's WRITEs), R (source of the peer's READs), L (where this side's READs
 *   land), S (this side's SENDs go from here, the peer's SENDs land here).
 * At the start every area holds integrity_byte(fill seed of the area, i) at its byte i, so each
 * side knows what the other's buffer holds without asking. INTEGRITY_CHUNKS messages of the
 * sizes below, at odd offsets (so no message starts aligned), cross every MTU boundary of
 * 256..4096 and go up to 300000 bytes (73 packets at MTU 4096).
 *
 * The out-of-band TCP connection carries text lines ('\n'-terminated):
 *   1. both sides write, then read:  "rig-endpoint qp=0x%06x psn=0x%06x gid=%04x:...(8) mac=..:..(6)"
 *      (Rig's endpoint text, rig/endpoint.hpp) and "region addr=0x%016llx rkey=0x%08x".
 *   2. then each step below in order. The passive side prepares (receives posted for a SEND
 *      step) and writes "ready N"; the actor does its operations, waits for every completion,
 *      checks what it can (a READ's bytes) and writes "done N ok" or "done N fail <why>"; the
 *      passive side checks its whole buffer and writes "checked N ok" or "checked N fail <why>".
 *   3. the client writes "bye", the server answers "bye"; each exits 0 only if every step of
 *      both sides said ok.
 * Steps (the actor first): 1 client WRITEs into the server's W; 2 server WRITEs into the
 * client's W; 3 client READs the server's R into its own L; 4 server READs the client's R;
 * 5 client SENDs into the server's S; 6 server SENDs to the client. Every operation moves chunk k
 * from the R area of the side whose data it is (the writer's, the read peer's, the sender's:
 * R is never written, so both sides know its bytes) to the same offset of the target area. Run once with
 * Rig as the client and once as the server, every operation goes both ways.
 *
 * What "checks its whole buffer" means: every byte of every area is what the steps so far put
 * there (the written chunks in W, the read chunks in L, the received ones in S) and every other
 * byte still holds its fill: nothing written twice, short, long or beside the target. */
#ifndef RIG_INTEGRITY_H
#define RIG_INTEGRITY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define INTEGRITY_AREA ((size_t)1 << 20)
#define INTEGRITY_BUFFER (4 * INTEGRITY_AREA)
#define INTEGRITY_STEPS 6
#define INTEGRITY_LINE 256

enum integrity_area { AREA_W = 0, AREA_R = 1, AREA_L = 2, AREA_S = 3 };

static const uint32_t integrity_chunk_sizes[] = {
    1, 2, 63, 64, 65, 255, 256, 257, 1023, 1024, 1025, 2047, 2048, 2049,
    4095, 4096, 4097, 8191, 8192, 12289, 65536, 65537, 262144, 300000,
};
#define INTEGRITY_CHUNKS (sizeof integrity_chunk_sizes / sizeof integrity_chunk_sizes[0])

/* Offset of chunk k inside an area: 5 bytes in, 3 bytes between chunks. */
static inline size_t integrity_chunk_offset(size_t k) {
    size_t at = 5;
    for (size_t i = 0; i < k; ++i) at += integrity_chunk_sizes[i] + 3;
    return at;
}

/* The byte at offset i of a pattern: a multiplicative hash of (seed, i), so that a byte moved,
 * doubled or dropped anywhere shows. */
static inline uint8_t integrity_byte(uint32_t seed, size_t i) {
    uint32_t x = (uint32_t)i * 0x9e3779b1u + seed * 0x85ebca77u;
    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 12;
    return (uint8_t)x;
}

/* The fill of area `area` of the server (is_server 1) or the client. */
static inline uint32_t integrity_fill_seed(int is_server, int area) { return 0x1000u + (uint32_t)is_server * 16u + (uint32_t)area; }

/* Whether the server acts in step s (1-based): the client acts in odd steps. */
static inline int integrity_actor_is_server(int step) { return step % 2 == 0; }

/* Fills every area of side `is_server`'s buffer. */
static inline void integrity_fill(uint8_t* buffer, int is_server) {
    for (int a = 0; a < 4; ++a)
        for (size_t i = 0; i < INTEGRITY_AREA; ++i) buffer[(size_t)a * INTEGRITY_AREA + i] = integrity_byte(integrity_fill_seed(is_server, a), i);
}

/* The step after which the chunks of area `area` of side `is_server` hold the peer's data
 * (0: never). Every operation moves bytes from the peer's R area (never written, so both sides
 * know it), chunk k from the same offset: a WRITE into W, a READ into L, a SEND into S. */
static inline int integrity_landing_step(int is_server, int area) {
    switch (area) {
    case AREA_W: return is_server ? 1 : 2;
    case AREA_L: return is_server ? 4 : 3;
    case AREA_S: return is_server ? 5 : 6;
    default: return 0;
    }
}

/* Checks side `is_server`'s whole buffer after steps 1..done_steps: 1 if every byte is what they
 * put there (the peer's R bytes in the chunks that landed) or the fill; else 0 with the first
 * wrong byte described in `why` (INTEGRITY_LINE bytes). */
static inline int integrity_check(const uint8_t* buffer, int is_server, int done_steps, char* why) {
    for (int a = 0; a < 4; ++a) {
        const uint8_t* area = buffer + (size_t)a * INTEGRITY_AREA;
        int step = integrity_landing_step(is_server, a);
        uint32_t fill = integrity_fill_seed(is_server, a), peer = integrity_fill_seed(!is_server, AREA_R);
        size_t k = 0, next = integrity_chunk_offset(0);
        for (size_t i = 0; i < INTEGRITY_AREA; ++i) {
            if (k < INTEGRITY_CHUNKS && i >= next + integrity_chunk_sizes[k]) {
                next += integrity_chunk_sizes[k] + 3;
                ++k;
            }
            int landed = step != 0 && done_steps >= step && k < INTEGRITY_CHUNKS && i >= next;
            uint8_t want = integrity_byte(landed ? peer : fill, i);
            if (area[i] != want) {
                snprintf(why, INTEGRITY_LINE, "area %c byte %zu (chunk %zu): 0x%02x, want 0x%02x (%s)", "WRLS"[a], i, k,
                         area[i], want, landed ? "the peer's data" : "untouched fill");
                return 0;
            }
        }
    }
    return 1;
}

#endif
