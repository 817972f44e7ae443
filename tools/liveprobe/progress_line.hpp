// A line on stderr that says how a long wait goes, rewritten in place: "liveprobe: placing
// probes in process 1234: 4.2 s" (placing 33,846 probes took 12 s of silence), "liveprobe:
// reading t.lptrace: 45% (1.2 of 2.7 GiB)". Only when stderr is a terminal: a file or a pipe
// (a test's, a log) never gets it, and what the tool writes there is as it was. Cleared before
// the tool says anything else, and at the end.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace liveprobe::tool {

class ProgressLine {
  public:
    // Shown when stderr is a terminal and `wanted` (false: stdout is that terminal and gets
    // lines meanwhile, which the progress would land in the middle of).
    explicit ProgressLine(bool wanted = true);
    bool enabled() const { return enabled_; }
    // The line's text now; written at most every 100 ms (a terminal takes a while too).
    void show(const std::string &text);
    // The line erased (if one was written): the cursor at the start of an empty line.
    void clear();
    ~ProgressLine() { clear(); }

  private:
    bool enabled_ = false;
    bool shown_ = false;
    std::chrono::steady_clock::time_point last_{};
};

// While a call that blocks runs (the agent placing probes for a -p trace), a thread of its own
// shows text(seconds so far) every 100 ms; stopped and the line cleared by stop() or at its end.
class ProgressTicker {
  public:
    explicit ProgressTicker(std::function<std::string(double)> text);
    void stop();
    ~ProgressTicker() { stop(); }

  private:
    ProgressLine line_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::thread thread_;
};

// "1.2 GiB", "340 MiB", "12 KiB": a size for the progress line.
std::string human_bytes(double bytes);

}  // namespace liveprobe::tool
