// rig-perf --sim: the model and the server as child processes, and their teardown (see
// sim_session.hpp for the contract).
#include "sim_session.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <expected>
#include <filesystem>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "args.hpp"
#include "placement.hpp"

namespace rig::perf {

namespace {

using clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::uint16_t perftest_default_port = 18515;

void say(const std::string& line) {
    std::fprintf(stderr, "rig-perf: --sim: %s\n", line.c_str());
    std::fflush(stderr);
}

std::string describe_status(int status) {
    if (WIFEXITED(status)) {
        return "exited with status " + std::to_string(WEXITSTATUS(status));
    }
    if (WIFSIGNALED(status)) {
        const char* name = sigabbrev_np(WTERMSIG(status));
        return name != nullptr ? std::string("was killed by SIG") + name
                               : "was killed by signal " + std::to_string(WTERMSIG(status));
    }
    return "ended with wait status " + std::to_string(status);
}

// A child process we started: in a process group of its own (pgid = pid), watched through a
// pidfd (readable once it exits) and reaped exactly once, under the session's lock.
struct child {
    explicit child(std::string n) : name(std::move(n)) {}
    std::string name;  // "the device model", "the server"
    pid_t pid = -1;
    int pidfd = -1;
    std::optional<int> status;  // set once reaped

    bool running() const { return pid > 0 && !status; }
};

// ": <the file's last line>" (a failed model's reason), or "" if it has none.
std::string last_line(const std::string& path) {
    std::FILE* f = path.empty() ? nullptr : std::fopen(path.c_str(), "r");
    if (f == nullptr) {
        return {};
    }
    std::string last;
    char buf[512];
    while (std::fgets(buf, sizeof buf, f) != nullptr) {
        std::string l(buf);
        while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) {
            l.pop_back();
        }
        if (!l.empty()) {
            last = l;
        }
    }
    std::fclose(f);
    return last.empty() ? std::string() : ": " + last;
}

// Reaps the child if it has exited; true once it has.
bool reap(child& c) {
    if (c.pid <= 0 || c.status) {
        return true;
    }
    int st = 0;
    const pid_t r = ::waitpid(c.pid, &st, WNOHANG);
    if (r == c.pid) {
        c.status = st;
        return true;
    }
    if (r < 0 && errno == ECHILD) {  // reaped elsewhere: nothing left to wait for
        c.status = 0;
        return true;
    }
    return false;
}

// Waits until the child exits or the deadline passes; true if it exited.
bool wait_exit(child& c, std::chrono::milliseconds deadline) {
    const auto until = clock::now() + deadline;
    while (!reap(c)) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - clock::now());
        if (left <= 0ms) {
            return false;
        }
        if (c.pidfd >= 0) {
            pollfd p{c.pidfd, POLLIN, 0};
            ::poll(&p, 1, static_cast<int>(std::min(left, 1000ms).count()));
        } else {
            std::this_thread::sleep_for(std::min(left, 10ms));
        }
    }
    return true;
}

// SIGTERM to the child's group, SIGKILL after the deadline; afterwards SIGKILL to whatever
// is left in the group (the group id cannot be reused while a member lives).
void stop(child& c, std::chrono::milliseconds deadline) {
    if (c.pid <= 0) {
        return;
    }
    if (c.running()) {
        ::kill(-c.pid, SIGTERM);
        ::kill(c.pid, SIGTERM);  // in case it has not reached its setpgid yet
        if (!wait_exit(c, deadline)) {
            ::kill(-c.pid, SIGKILL);
            ::kill(c.pid, SIGKILL);
            int st = 0;
            if (::waitpid(c.pid, &st, 0) == c.pid) {
                c.status = st;
            }
        }
    }
    ::kill(-c.pid, SIGKILL);
    if (c.pidfd >= 0) {
        ::close(c.pidfd);
        c.pidfd = -1;
    }
}

struct session {
    sim_setup setup;
    std::mutex lock;  // guards the children: main thread starts them, the watcher may stop them
    std::string dir;
    child model{"the device model"};
    child server{"the server"};
    bool torn_down = false;
    const char* phase = "while starting";  // for the watcher's message
    std::string model_log;
    int signal_fd = -1;
    int wake_fd = -1;  // eventfd: the watcher re-reads the children, or ends
    std::atomic<bool> watching{true};

    // Server first: its queue pairs live on the model; then the model, which removes its
    // sockets on SIGTERM; then the directory (also if the model could not clean up).
    void teardown() {
        const std::lock_guard g(lock);
        if (torn_down) {
            return;
        }
        torn_down = true;
        stop(server, setup.stop_deadline);
        stop(model, setup.stop_deadline);
        if (!dir.empty()) {
            std::error_code ec;
            std::filesystem::remove_all(dir, ec);
        }
    }

    void wake() const {
        const std::uint64_t one = 1;
        [[maybe_unused]] const auto n = ::write(wake_fd, &one, sizeof one);
    }
};

// fork + exec of `exe args` in a new process group, stdout to /dev/null, stderr to `log` if
// one is named (else ours), on `cpus` if given (placement.hpp), SIGINT/SIGTERM unblocked and at
// their default action (the mask and ignored dispositions survive exec). The child dies with us (PR_SET_PDEATHSIG) if this
// process is killed outright. An exec failure comes back through a close-on-exec pipe.
std::expected<void, std::string> spawn(session& s, child& c, const std::string& exe,
                                       const std::vector<std::string>& args, const std::string& log = {},
                                       const cpu_set_t* cpus = nullptr) {
    std::vector<std::string> all{exe};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all) {
        argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) {
        return std::unexpected(std::string("pipe: ") + std::strerror(errno));
    }
    const pid_t parent = ::getpid();
    const std::lock_guard g(s.lock);  // the watcher sees the child only once it is recorded
    const pid_t pid = ::fork();
    if (pid < 0) {
        const int e = errno;
        ::close(report[0]);
        ::close(report[1]);
        return std::unexpected(std::string("fork: ") + std::strerror(e));
    }
    if (pid == 0) {  // async-signal-safe calls only until exec
        ::setpgid(0, 0);
        struct sigaction dfl{};
        dfl.sa_handler = SIG_DFL;
        ::sigaction(SIGINT, &dfl, nullptr);
        ::sigaction(SIGTERM, &dfl, nullptr);
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (::getppid() != parent) {
            ::_exit(127);
        }
        if (cpus != nullptr) {
            run_on(*cpus);   // refused: the child runs where its parent may
        }
        const int null = ::open("/dev/null", O_WRONLY);
        if (null >= 0) {
            ::dup2(null, 1);
        }
        if (!log.empty()) {
            const int f = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (f >= 0) {
                ::dup2(f, 2);
            }
        }
        ::execv(argv[0], argv.data());
        const int e = errno;
        [[maybe_unused]] const auto n = ::write(report[1], &e, sizeof e);
        ::_exit(127);
    }
    ::setpgid(pid, pid);  // also here: no window where a group signal would miss it
    ::close(report[1]);
    int exec_errno = 0;
    const ssize_t n = ::read(report[0], &exec_errno, sizeof exec_errno);
    ::close(report[0]);
    if (n == static_cast<ssize_t>(sizeof exec_errno)) {
        int st = 0;
        ::waitpid(pid, &st, 0);
        return std::unexpected("cannot run " + exe + ": " + std::strerror(exec_errno));
    }
    c.pid = pid;
    c.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    s.wake();
    return {};
}

// Ends the process from the watcher while the client may still run in the main thread. The
// client's own reaction to the model going away (a failed queue pair, a lost connection) is
// not the reason: stderr goes to /dev/null first, and the one line goes to the real stderr.
// What the client printed before is flushed; then _exit, as its thread cannot be unwound.
[[noreturn]] void end_process(session& s, const std::string& line, int status) {
    std::fflush(stdout);
    const int real_stderr = ::fcntl(2, F_DUPFD_CLOEXEC, 3);
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (real_stderr >= 0 && null >= 0) {
        ::dup2(null, 2);
    }
    s.teardown();
    const std::string text = "rig-perf: --sim: " + line + "\n";
    [[maybe_unused]] const auto n = ::write(real_stderr >= 0 ? real_stderr : 2, text.data(), text.size());
    ::_exit(status);
}

// The watcher thread: SIGINT/SIGTERM, or a child that ends on its own while the session
// runs, stop everything and end the process; this is the only place that happens.
void watch(session& s) {
    while (s.watching.load()) {
        std::vector<pollfd> fds{{s.signal_fd, POLLIN, 0}, {s.wake_fd, POLLIN, 0}};
        bool need_timeout = false;
        {
            const std::lock_guard g(s.lock);
            for (const child* c : {&s.model, &s.server}) {
                if (c->running()) {
                    if (c->pidfd >= 0) {
                        fds.push_back({c->pidfd, POLLIN, 0});
                    } else {
                        need_timeout = true;
                    }
                }
            }
        }
        ::poll(fds.data(), fds.size(), need_timeout ? 100 : -1);
        if (fds[1].revents & POLLIN) {
            std::uint64_t v = 0;
            [[maybe_unused]] const auto n = ::read(s.wake_fd, &v, sizeof v);
        }
        if (fds[0].revents & POLLIN) {
            signalfd_siginfo si{};
            if (::read(s.signal_fd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
                const int sig = static_cast<int>(si.ssi_signo);
                end_process(s, std::string("stopped by SIG") + sigabbrev_np(sig) +
                                   "; the server and the device model are stopped",
                            128 + sig);
            }
        }
        if (!s.watching.load()) {
            break;
        }
        std::string died;
        {
            const std::lock_guard g(s.lock);
            for (child* c : {&s.model, &s.server}) {
                if (c->running() && reap(*c)) {
                    // a server that finished its part (status 0) is no failure
                    if (c == &s.server && WIFEXITED(*c->status) && WEXITSTATUS(*c->status) == 0) {
                        continue;
                    }
                    died = c->name + " " + describe_status(*c->status) + " " + s.phase +
                           (c == &s.model ? last_line(s.model_log) : std::string());
                }
            }
        }
        if (!died.empty()) {
            end_process(s, died, 1);
        }
    }
}

std::expected<std::uint16_t, std::string> free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return std::unexpected(std::string("socket: ") + std::strerror(errno));
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        const int e = errno;
        ::close(fd);
        return std::unexpected(std::string("no free TCP port: ") + std::strerror(e));
    }
    ::close(fd);
    return ntohs(a.sin_port);
}

bool is_socket(const std::string& path) {
    std::error_code ec;
    return std::filesystem::is_socket(path, ec);
}

std::string executable_dir() {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string() : self.parent_path().string();
}

}  // namespace

bool names_port(const std::vector<std::string>& args) {
    for (const token& t : scan(args)) {
        if (t.f != nullptr && t.f->id == opt::port && t.error.empty()) {
            return true;
        }
    }
    return false;
}

std::vector<std::string> server_arguments(const std::vector<std::string>& args_for_server, const std::string& device,
                                          std::uint16_t port) {
    // read as parse_options reads them (getopt_long: -p7, --po=7 and -ap 7 all name the port),
    // so that what only the client carries leaves in every spelling
    // (what it cannot read is no rig-perf option: parse_options refused it before a session
    // starts; a stand-in's own flags go on as given)
    std::vector<std::string> out = arguments_of(scan(args_for_server), [](const flag& f) {
        switch (f.id) {
        case opt::sim:
        case opt::ib_dev:
        case opt::port:
        case opt::plot:
        case opt::out_json:
        case opt::out_json_file:
        case opt::family: return false;
        default: return true;
        }
    });
    out.insert(out.end(), {"-d", device, "-p", std::to_string(port)});
    return out;
}

std::string find_nicsim() {
    if (const char* env = std::getenv("RIG_NICSIM"); env != nullptr && *env != '\0') {
        return env;
    }
    const std::string here = executable_dir();
    if (!here.empty()) {
        for (const std::string& candidate : {here + "/rig-nicsim", here + "/../rig-nicsim"}) {
            if (::access(candidate.c_str(), X_OK) == 0) {
                return std::filesystem::path(candidate).lexically_normal().string();
            }
        }
    }
    const char* path = std::getenv("PATH");
    std::string_view rest = path != nullptr ? path : "";
    while (!rest.empty()) {
        const auto colon = rest.find(':');
        const std::string d(rest.substr(0, colon));
        rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
        const std::string candidate = (d.empty() ? std::string(".") : d) + "/rig-nicsim";
        if (::access(candidate.c_str(), X_OK) == 0) {
            return candidate;
        }
    }
    return {};
}

int run_with_sim(const options& o, const std::vector<std::string>& args_for_server,
                 const std::function<int(const options&)>& run_client) {
    sim_setup setup;
    setup.nicsim = find_nicsim();
    setup.server = "/proc/self/exe";
    return run_with_sim(o, args_for_server, run_client, setup);
}

namespace {

// One --sim run, phase by phase (run_with_sim): signals, directory and placement; the model;
// the server; the client; the judgement of the server's end. finish() undoes the first phase
// (and stops what the others started) whichever phase came last.
class sim_run {
public:
    sim_run(const options& o, const sim_setup& setup) : _o(o) {
        _s.setup = setup;
        sigemptyset(&_stop_signals);
        sigaddset(&_stop_signals, SIGINT);
        sigaddset(&_stop_signals, SIGTERM);
        CPU_ZERO(&_old_cpus);
    }
    sim_run(const sim_run&) = delete;
    sim_run& operator=(const sim_run&) = delete;
    ~sim_run() { stop_watcher(); }

    std::expected<void, std::string> begin();
    std::expected<void, std::string> start_model();
    std::expected<std::uint16_t, std::string> start_server(const std::vector<std::string>& args_for_server);
    int run_client(const std::function<int(const options&)>& run, std::uint16_t port);
    int judge_server(int rc);
    int finish(int rc);
    int fail(const std::string& why) {
        stop_watcher();  // the children's exits are ours now
        _s.teardown();
        say(why);
        return finish(1);
    }

private:
    void stop_watcher();
    std::string socket_of(int function) const {
        const bool mixed = _o.sim_family == "mixed";
        const std::string family = !mixed ? _o.sim_family : function == 0 ? "mlx5" : "bnxt";
        return _s.dir + "/" + family + "-" + std::to_string(function) + ".sock";
    }
    const cpu_set_t* others() const { return _where ? &_where->others : nullptr; }

    const options& _o;
    session _s;
    sigset_t _stop_signals;
    sigset_t _old_mask;
    bool _mask_set = false;
    std::optional<sim_placement> _where;
    cpu_set_t _old_cpus;
    bool _placed = false;
    std::thread _watcher;
};

// SIGINT/SIGTERM go to the watcher's signalfd: blocked here before any thread of the session
// starts (threads inherit the mask), and not ignored (a shell starts background jobs with SIGINT
// ignored, and an ignored signal is dropped even while blocked). Then the session's directory,
// the placement (placement.hpp: this thread, and the watcher and the client's threads it starts,
// on the CPUs left to rig-perf; the old mask back at finish) and the watcher.
std::expected<void, std::string> sim_run::begin() {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    pthread_sigmask(SIG_BLOCK, &_stop_signals, &_old_mask);
    _mask_set = true;
    _s.signal_fd = ::signalfd(-1, &_stop_signals, SFD_CLOEXEC);
    _s.wake_fd = ::eventfd(0, EFD_CLOEXEC);
    if (_s.signal_fd < 0 || _s.wake_fd < 0) {
        return std::unexpected(std::string("signalfd/eventfd: ") + std::strerror(errno));
    }
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/rig-perf-sim-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
        return std::unexpected("cannot make a directory " + tmpl + ": " + std::strerror(errno));
    }
    _s.dir = tmpl;
    _where = place_sim();
    _placed = _where && ::sched_getaffinity(0, sizeof _old_cpus, &_old_cpus) == 0 && run_on(_where->others);
    _watcher = std::thread([this] { watch(_s); });
    return {};
}

// --family: both functions of one family, or mixed: the client's on mlx5, the server's on bnxt
// (rig-nicsim --family mlx5,bnxt: function k of the k-th family), RC between them. The model's
// stderr goes to a log in the session's directory: its warnings about a client that vanished
// mid-traffic (the server stopped on Ctrl-C) are not the user's business; its last line is
// quoted when it fails.
std::expected<void, std::string> sim_run::start_model() {
    const std::string sock0 = socket_of(0);
    const std::string sock1 = socket_of(1);
    if (sock1.size() >= sizeof(sockaddr_un::sun_path)) {
        return std::unexpected("socket path too long for AF_UNIX: " + sock1 + " (set TMPDIR to a shorter folder)");
    }
    _s.model_log = _s.dir + "/rig-nicsim.log";
    std::vector<std::string> args{"--family", _o.sim_family == "mixed" ? "mlx5,bnxt" : _o.sim_family, "--functions",
                                  "2", "--socket-dir", _s.dir};
    if (_where) {
        args.insert(args.end(), {"--core-cpu", std::to_string(_where->core_cpu)});
    }
    if (auto r = spawn(_s, _s.model, _s.setup.nicsim, args, _s.model_log, _where ? &_where->model : nullptr); !r) {
        return std::unexpected(r.error());
    }
    const auto until = clock::now() + _s.setup.start_deadline;
    while (!(is_socket(sock0) && is_socket(sock1))) {
        if (clock::now() >= until) {
            return std::unexpected("the device model (" + _s.setup.nicsim + ") served no sockets in " + _s.dir +
                                   " within " + std::to_string(_s.setup.start_deadline.count()) + " ms" +
                                   last_line(_s.model_log));
        }
        std::this_thread::sleep_for(5ms);  // an early exit of the model is the watcher's
    }
    return {};
}

// The server on function 1, on a free port unless the user named one; the port it listens on.
std::expected<std::uint16_t, std::string> sim_run::start_server(const std::vector<std::string>& args_for_server) {
    std::uint16_t port = _o.port;
    if (!names_port(args_for_server) && _o.port == perftest_default_port) {
        auto p = free_port();
        if (!p) {
            return std::unexpected(p.error());
        }
        port = *p;
    }
    if (auto r = spawn(_s, _s.server, _s.setup.server,
                       server_arguments(args_for_server, "vfio-user:" + socket_of(1), port), {}, others());
        !r) {
        return std::unexpected(r.error());
    }
    return port;
}

// The client, in this process, on function 0; what it returns.
int sim_run::run_client(const std::function<int(const options&)>& run, std::uint16_t port) {
    {
        const std::lock_guard g(_s.lock);
        _s.phase = "while the test ran";
    }
    options client = _o;
    client.device = "vfio-user:" + socket_of(0);
    client.server = "127.0.0.1";
    client.port = port;
    client.sim = false;
    try {
        return run(client);
    } catch (...) {
        finish(1);
        throw;
    }
}

// The client is done: the watcher stops, and the server's exit is ours to judge. After a good
// run the server ends by itself (perftest's closing handshake); else it is stopped.
int sim_run::judge_server(int rc) {
    stop_watcher();
    std::string server_failed;
    {
        const std::lock_guard g(_s.lock);
        if (rc == 0 && !wait_exit(_s.server, _s.setup.server_exit_deadline)) {
            server_failed = "the server did not end within " +
                            std::to_string(_s.setup.server_exit_deadline.count()) + " ms after the client";
        } else if (rc == 0 && _s.server.status &&
                   !(WIFEXITED(*_s.server.status) && WEXITSTATUS(*_s.server.status) == 0)) {
            server_failed = "the server " + describe_status(*_s.server.status);
        }
    }
    _s.teardown();
    if (!server_failed.empty()) {
        say(server_failed);
        rc = 1;
    }
    return finish(rc);
}

// Stops the watcher (which ends the process itself if it is already tearing down).
void sim_run::stop_watcher() {
    if (_watcher.joinable()) {
        _s.watching.store(false);
        _s.wake();
        _watcher.join();
    }
}

// Everything still running stopped, the directory gone, the mask and CPUs as they were; a stop
// signal that came meanwhile still gives 128 + signal.
int sim_run::finish(int rc) {
    stop_watcher();
    _s.teardown();
    ::close(_s.signal_fd);
    ::close(_s.wake_fd);
    _s.signal_fd = _s.wake_fd = -1;
    if (!_mask_set) {
        return rc;
    }
    timespec zero{};
    const int sig = ::sigtimedwait(&_stop_signals, nullptr, &zero);
    if (sig > 0) {
        say(std::string("stopped by SIG") + sigabbrev_np(sig));
        std::fflush(stdout);
        std::_Exit(128 + sig);
    }
    pthread_sigmask(SIG_SETMASK, &_old_mask, nullptr);
    _mask_set = false;
    if (_placed) {
        run_on(_old_cpus);
        _placed = false;
    }
    return rc;
}

}  // namespace

int run_with_sim(const options& o, const std::vector<std::string>& args_for_server,
                 const std::function<int(const options&)>& run_client, const sim_setup& setup) {
    if (!run_client) {
        throw std::invalid_argument("run_with_sim: run_client is empty");
    }
    if (setup.nicsim.empty()) {
        say("rig-nicsim not found (next to rig-perf, one folder up, or on PATH; or set RIG_NICSIM)");
        return 1;
    }
    sim_run run(o, setup);
    if (auto r = run.begin(); !r) {
        return run.fail(r.error());
    }
    if (auto r = run.start_model(); !r) {
        return run.fail(r.error());
    }
    const auto port = run.start_server(args_for_server);
    if (!port) {
        return run.fail(port.error());
    }
    return run.judge_server(run.run_client(run_client, *port));
}

}  // namespace rig::perf
