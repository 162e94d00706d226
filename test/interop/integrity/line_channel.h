/* The integrity exchange's out-of-band TCP channel (integrity.h): connect or accept with a
 * deadline, and '\n'-terminated lines each read or written within the deadline. Plain POSIX
 * sockets in C, shared by the verbs peer and Rig's peer. */
#ifndef RIG_LINE_CHANNEL_H
#define RIG_LINE_CHANNEL_H

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "integrity.h"

struct line_channel {
    int fd;
    char pending[INTEGRITY_LINE * 4];
    size_t have;
    int timeout_ms;
    char error[INTEGRITY_LINE];
};

static inline long long channel_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Waits until fd is ready for `events` or the deadline passes: 1 ready, 0 deadline, -1 error. */
static inline int channel_wait(int fd, short events, long long deadline) {
    for (;;) {
        long long left = deadline - channel_now_ms();
        if (left <= 0) return 0;
        struct pollfd p = {fd, events, 0};
        int n = poll(&p, 1, (int)left);
        if (n > 0) return 1;
        if (n < 0 && errno != EINTR) return -1;
    }
}

/* Listens on `port` of IPv4 address `bind_to` (NULL: every address; in the guest, QEMU's user
 * network delivers what the host forwards from its loopback to the guest's 169.254.0.0/16
 * address; on the host, 127.0.0.1: nothing but loopback) and accepts one peer within the
 * deadline. */
static inline int channel_accept(struct line_channel* c, const char* bind_to, unsigned port) {
    long long deadline = channel_now_ms() + c->timeout_ms;
    int one = 1, fd = -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind_to != NULL && inet_pton(AF_INET, bind_to, &a.sin_addr) != 1) {
        snprintf(c->error, sizeof c->error, "'%s' is no IPv4 address", bind_to);
        return -1;
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr*)&a, sizeof a) < 0 || listen(fd, 1) < 0) {
        snprintf(c->error, sizeof c->error, "listen on port %u: %s", port, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    int ready = channel_wait(fd, POLLIN, deadline);
    c->fd = ready == 1 ? accept4(fd, NULL, NULL, SOCK_CLOEXEC) : -1;
    if (c->fd < 0) snprintf(c->error, sizeof c->error, "no peer connected to port %u within %d ms", port, c->timeout_ms);
    close(fd);
    return c->fd < 0 ? -1 : 0;
}

/* Connects to host:port, trying again every 100 ms until the deadline (the server may not be
 * listening yet). */
static inline int channel_connect(struct line_channel* c, const char* host, unsigned port) {
    long long deadline = channel_now_ms() + c->timeout_ms;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        snprintf(c->error, sizeof c->error, "'%s' is no IPv4 address", host);
        return -1;
    }
    while (channel_now_ms() < deadline) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr*)&a, sizeof a) == 0) {
            c->fd = fd;
            return 0;
        }
        if (fd >= 0) close(fd);
        usleep(100000);
    }
    snprintf(c->error, sizeof c->error, "could not connect to %s:%u within %d ms", host, port, c->timeout_ms);
    return -1;
}

static inline int channel_write(struct line_channel* c, const char* line) {
    long long deadline = channel_now_ms() + c->timeout_ms;
    char out[INTEGRITY_LINE + 2];
    size_t n = (size_t)snprintf(out, sizeof out, "%s\n", line), done = 0;
    while (done < n) {
        if (channel_wait(c->fd, POLLOUT, deadline) != 1) break;
        ssize_t w = send(c->fd, out + done, n - done, MSG_NOSIGNAL);
        if (w <= 0 && errno != EINTR && errno != EAGAIN) break;
        if (w > 0) done += (size_t)w;
    }
    if (done < n) snprintf(c->error, sizeof c->error, "writing '%s' to the peer failed", line);
    return done < n ? -1 : 0;
}

/* The next line (without its '\n') into `line` (INTEGRITY_LINE bytes). */
static inline int channel_read(struct line_channel* c, char* line) {
    long long deadline = channel_now_ms() + c->timeout_ms;
    for (;;) {
        char* end = (char*)memchr(c->pending, '\n', c->have);
        if (end != NULL) {
            size_t n = (size_t)(end - c->pending);
            if (n >= INTEGRITY_LINE) break;
            memcpy(line, c->pending, n);
            line[n] = '\0';
            c->have -= n + 1;
            memmove(c->pending, end + 1, c->have);
            return 0;
        }
        if (c->have == sizeof c->pending || channel_wait(c->fd, POLLIN, deadline) != 1) break;
        ssize_t r = recv(c->fd, c->pending + c->have, sizeof c->pending - c->have, 0);
        if (r == 0 || (r < 0 && errno != EINTR)) break;
        if (r > 0) c->have += (size_t)r;
    }
    snprintf(c->error, sizeof c->error, "no line from the peer within %d ms (closed, silent or too long)", c->timeout_ms);
    return -1;
}

#endif
