/* verbs-peer: the libibverbs side of the integrity exchange (integrity.h), run in the interop
 * guest on Linux Soft-RoCE (rxe) against rig-peer on the device model.
 *
 *   verbs-peer -d rxe0 -x 1 -m 1024 --server 18600
 *   verbs-peer -d rxe0 -x 1 -m 4096 --connect 169.254.2.2:18600
 *
 * An RC queue pair as perftest makes one (perftest_resources.c ctx_modify_qp_to_init/rtr/rts):
 * RoCEv2 GID index -x for the source GID, the peer's GID as the GRH destination (the kernel
 * derives the destination MAC of a link-local GID from the GID itself: ib_core's
 * rdma_addr_find_l2_eth_by_grh / rdma_get_ll_mac), ack timeout 14, retry 7, RNR retry 7, as
 * Rig's queue pairs connect. Exit 0 only when every step of both sides said ok. */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <stdlib.h>

#include "integrity_run.h"

struct verbs_peer {
    struct ibv_context* context;
    struct ibv_pd* pd;
    struct ibv_mr* mr;
    struct ibv_cq* cq;
    struct ibv_qp* qp;
    uint8_t* buffer;
    unsigned long long peer_addr;
    unsigned peer_rkey;
    int timeout_ms;
    struct ibv_wc held[64]; /* completions polled but not yet asked for, by side */
    int held_count;
};

static int post(struct verbs_peer* v, enum ibv_wr_opcode op, size_t local, size_t remote, uint32_t n, char* why) {
    struct ibv_sge sge = {(uintptr_t)(v->buffer + local), n, v->mr->lkey};
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = local;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = v->peer_addr + remote;
    wr.wr.rdma.rkey = v->peer_rkey;
    int rc = ibv_post_send(v->qp, &wr, &bad);
    if (rc != 0) snprintf(why, INTEGRITY_LINE, "ibv_post_send: %s", strerror(rc));
    return rc == 0 ? 0 : -1;
}
static int post_write(void* s, size_t local, size_t remote, uint32_t n, char* why) { return post(s, IBV_WR_RDMA_WRITE, local, remote, n, why); }
static int post_read(void* s, size_t remote, size_t local, uint32_t n, char* why) { return post(s, IBV_WR_RDMA_READ, local, remote, n, why); }
static int post_send(void* s, size_t local, uint32_t n, char* why) { return post(s, IBV_WR_SEND, local, 0, n, why); }

static int post_receive(void* s, size_t local, uint32_t capacity, char* why) {
    struct verbs_peer* v = s;
    struct ibv_sge sge = {(uintptr_t)(v->buffer + local), capacity, v->mr->lkey};
    struct ibv_recv_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = local;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    int rc = ibv_post_recv(v->qp, &wr, &bad);
    if (rc != 0) snprintf(why, INTEGRITY_LINE, "ibv_post_recv: %s", strerror(rc));
    return rc == 0 ? 0 : -1;
}

/* The oldest completion of the receive side (`receive` 1) or the send side, within the deadline:
 * one CQ serves both, so a completion of the other side is held for its own call. */
static int next_completion(struct verbs_peer* v, int receive, struct ibv_wc* out, char* why) {
    long long deadline = channel_now_ms() + v->timeout_ms;
    for (;;) {
        for (int i = 0; i < v->held_count; ++i) {
            if (((v->held[i].opcode & IBV_WC_RECV) != 0) == receive) {
                *out = v->held[i];
                memmove(&v->held[i], &v->held[i + 1], sizeof *out * (size_t)(v->held_count - i - 1));
                --v->held_count;
                return 0;
            }
        }
        if (v->held_count == 64 || channel_now_ms() > deadline) break;
        int n = ibv_poll_cq(v->cq, 1, &v->held[v->held_count]);
        if (n < 0) return snprintf(why, INTEGRITY_LINE, "ibv_poll_cq failed"), -1;
        /* an error completion's opcode is undefined: it answers whichever side asks */
        if (n == 1 && v->held[v->held_count].status != IBV_WC_SUCCESS) {
            *out = v->held[v->held_count];
            return 0;
        }
        v->held_count += n;
    }
    snprintf(why, INTEGRITY_LINE, "no %s completion within %d ms", receive ? "receive" : "send", v->timeout_ms);
    return -1;
}

static int wait_side(void* s, int receive, uint32_t bytes, char* why) {
    struct ibv_wc wc;
    if (next_completion(s, receive, &wc, why) != 0) return -1;
    if (wc.status != IBV_WC_SUCCESS)
        return snprintf(why, INTEGRITY_LINE, "completion failed: %s (vendor 0x%x)", ibv_wc_status_str(wc.status), wc.vendor_err), -1;
    if (receive && wc.byte_len != bytes)
        return snprintf(why, INTEGRITY_LINE, "received %u bytes, want %u", wc.byte_len, bytes), -1;
    return 0;
}
static int wait_send(void* s, uint32_t bytes, char* why) { return wait_side(s, 0, bytes, why); }
static int wait_receive(void* s, uint32_t bytes, char* why) { return wait_side(s, 1, bytes, why); }

static struct ibv_context* open_device(const char* name, char* why) {
    int n = 0;
    struct ibv_device** list = ibv_get_device_list(&n);
    struct ibv_context* c = NULL;
    for (int i = 0; list != NULL && i < n && c == NULL; ++i)
        if (name == NULL || strcmp(ibv_get_device_name(list[i]), name) == 0) c = ibv_open_device(list[i]);
    if (c == NULL) snprintf(why, INTEGRITY_LINE, "no RDMA device %s (%d found)", name ? name : "", n);
    if (list != NULL) ibv_free_device_list(list);
    return c;
}

static int make_objects(struct verbs_peer* v, const char* device, char* why) {
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    struct ibv_qp_init_attr a;
    if ((v->context = open_device(device, why)) == NULL) return -1;
    if (posix_memalign((void**)&v->buffer, 4096, INTEGRITY_BUFFER) != 0) return snprintf(why, INTEGRITY_LINE, "no memory"), -1;
    if ((v->pd = ibv_alloc_pd(v->context)) == NULL || (v->mr = ibv_reg_mr(v->pd, v->buffer, INTEGRITY_BUFFER, access)) == NULL ||
        (v->cq = ibv_create_cq(v->context, 128, NULL, NULL, 0)) == NULL)
        return snprintf(why, INTEGRITY_LINE, "PD, MR or CQ refused: %s", strerror(errno)), -1;
    memset(&a, 0, sizeof a);
    a.send_cq = a.recv_cq = v->cq;
    a.cap.max_send_wr = a.cap.max_recv_wr = 48;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    a.qp_type = IBV_QPT_RC;
    if ((v->qp = ibv_create_qp(v->pd, &a)) == NULL) return snprintf(why, INTEGRITY_LINE, "QP refused: %s", strerror(errno)), -1;
    return 0;
}

static enum ibv_mtu mtu_enum(int bytes) {
    return bytes >= 4096 ? IBV_MTU_4096 : bytes >= 2048 ? IBV_MTU_2048 : bytes >= 1024 ? IBV_MTU_1024 : bytes >= 512 ? IBV_MTU_512 : IBV_MTU_256;
}

/* RESET -> INIT -> RTR -> RTS to the peer's endpoint (qp, psn, gid). */
static int connect_qp(struct verbs_peer* v, int gid_index, int mtu, uint32_t psn, uint32_t peer_qp, uint32_t peer_psn,
                      const union ibv_gid* peer_gid, char* why) {
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    int rc = ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc != 0) return snprintf(why, INTEGRITY_LINE, "RESET to INIT: %s", strerror(rc)), -1;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu_enum(mtu);
    a.dest_qp_num = peer_qp;
    a.rq_psn = peer_psn;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = *peer_gid;
    a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    rc = ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc != 0) return snprintf(why, INTEGRITY_LINE, "INIT to RTR: %s", strerror(rc)), -1;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = psn;
    a.max_rd_atomic = 16;
    rc = ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                      IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc != 0) return snprintf(why, INTEGRITY_LINE, "RTR to RTS: %s", strerror(rc)), -1;
    return 0;
}

/* Rig's endpoint text (rig/endpoint.hpp): the GID in eight groups of four hex digits, the MAC
 * that a link-local GID carries (its modified EUI-64: RFC 4291 appendix A). */
static void endpoint_line(char* out, uint32_t qp, uint32_t psn, const union ibv_gid* g) {
    const uint8_t* r = g->raw;
    int n = snprintf(out, INTEGRITY_LINE, "rig-endpoint qp=0x%06x psn=0x%06x gid=", qp, psn);
    for (int i = 0; i < 16; i += 2) n += snprintf(out + n, INTEGRITY_LINE - (size_t)n, "%02x%02x%s", r[i], r[i + 1], i < 14 ? ":" : "");
    snprintf(out + n, INTEGRITY_LINE - (size_t)n, " mac=%02x:%02x:%02x:%02x:%02x:%02x", r[8] ^ 2, r[9], r[10], r[13], r[14], r[15]);
}

static int parse_endpoint(const char* line, uint32_t* qp, uint32_t* psn, union ibv_gid* g, char* why) {
    unsigned w[8];
    if (sscanf(line, "rig-endpoint qp=0x%x psn=0x%x gid=%4x:%4x:%4x:%4x:%4x:%4x:%4x:%4x", qp, psn, &w[0], &w[1], &w[2], &w[3],
               &w[4], &w[5], &w[6], &w[7]) != 10 || *qp > 0xffffff || *psn > 0xffffff)
        return snprintf(why, INTEGRITY_LINE, "the peer's endpoint '%.200s' is not Rig's endpoint text", line), -1;
    for (int i = 0; i < 8; ++i) {
        g->raw[2 * i] = (uint8_t)(w[i] >> 8);
        g->raw[2 * i + 1] = (uint8_t)w[i];
    }
    return 0;
}

struct options {
    const char* device;
    int gid_index, mtu, server, timeout_ms;
    char host[64];
    unsigned port;
};

static int parse_options(int argc, char** argv, struct options* o) {
    *o = (struct options){NULL, 0, 1024, -1, 60000, "", 0};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (strcmp(a, "-d") == 0) o->device = v;
        else if (strcmp(a, "-x") == 0) o->gid_index = atoi(v);
        else if (strcmp(a, "-m") == 0) o->mtu = atoi(v);
        else if (strcmp(a, "--timeout-ms") == 0) o->timeout_ms = atoi(v);
        else if (strcmp(a, "--server") == 0) o->server = 1, o->port = (unsigned)atoi(v);
        else if (strcmp(a, "--connect") == 0 && sscanf(v, "%63[0-9.]:%u", o->host, &o->port) == 2) o->server = 0;
        else return fprintf(stderr, "verbs-peer: '%s %s' not understood\n", a, v), -1;
    }
    if (o->server < 0 || o->port == 0 || o->port > 65535 || (argc % 2) == 0)
        return fprintf(stderr, "usage: verbs-peer [-d DEV] [-x GID_INDEX] [-m MTU] [--timeout-ms N] (--server PORT | --connect IP:PORT)\n"), -1;
    return 0;
}

int main(int argc, char** argv) {
    struct options o;
    struct verbs_peer v;
    struct line_channel c;
    char why[INTEGRITY_LINE] = "", mine[INTEGRITY_LINE], region[INTEGRITY_LINE], peer[INTEGRITY_LINE];
    union ibv_gid gid, peer_gid;
    uint32_t peer_qp, peer_psn, psn = (uint32_t)(channel_now_ms() * 2654435761u) & 0xffffff;
    if (parse_options(argc, argv, &o) != 0) return 2;
    memset(&v, 0, sizeof v);
    memset(&c, 0, sizeof c);
    v.timeout_ms = c.timeout_ms = o.timeout_ms;
    c.fd = -1;
    int rc = make_objects(&v, o.device, why);
    if (rc == 0 && ibv_query_gid(v.context, 1, o.gid_index, &gid) != 0) rc = -1, snprintf(why, sizeof why, "no GID %d", o.gid_index);
    if (rc == 0) {
        integrity_fill(v.buffer, o.server);
        endpoint_line(mine, v.qp->qp_num, psn, &gid);
        snprintf(region, sizeof region, "region addr=0x%016llx rkey=0x%08x", (unsigned long long)(uintptr_t)v.buffer, v.mr->rkey);
        rc = o.server ? channel_accept(&c, NULL, o.port) : channel_connect(&c, o.host, o.port);
        if (rc != 0) snprintf(why, sizeof why, "%s", c.error);
    }
    if (rc == 0) rc = integrity_hello(&c, mine, region, peer, &v.peer_addr, &v.peer_rkey, why);
    if (rc == 0) rc = parse_endpoint(peer, &peer_qp, &peer_psn, &peer_gid, why);
    if (rc == 0) rc = connect_qp(&v, o.gid_index, o.mtu, psn, peer_qp, peer_psn, &peer_gid, why);
    struct integrity_ops ops = {&v, v.buffer, post_write, post_read, post_send, post_receive, wait_send, wait_receive};
    if (rc == 0) rc = integrity_steps(&c, &ops, o.server, why);
    if (rc != 0) {
        fprintf(stderr, "verbs-peer: FAIL: %s\n", why);
        return 1;
    }
    printf("verbs-peer: PASS: %s, MTU %d, 6 steps of %zu messages, every byte checked on both sides\n", o.server ? "server" : "client",
           o.mtu, INTEGRITY_CHUNKS);
    return 0;
}
