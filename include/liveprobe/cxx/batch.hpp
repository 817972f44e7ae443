// liveprobe C++ API: registering many probes as one transaction.
//
//   liveprobe::Batch batch;
//   batch.add(liveprobe::probe(&open_file).on_entry(...));
//   batch.add(liveprobe::kretprobe("close_file").on_return(...));
//   auto probes = batch.commit();   // all registered, or none (and why not)
//
// commit() registers the kprobes with one register_kprobes call and the return probes with one
// register_kretprobes call (each armed in one stop of the other threads); if the second fails,
// the first are unregistered again. A Batch destroyed without a commit registers nothing.
#pragma once

#include <liveprobe/cxx/probe.hpp>

#include <cerrno>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace liveprobe {

class Batch {
public:
    Batch() = default;
    Batch(Batch &&) noexcept = default;
    Batch &operator=(Batch &&) noexcept = default;
    Batch(const Batch &) = delete;
    Batch &operator=(const Batch &) = delete;

    // Adds a probe being built (kprobe(...), kretprobe(...), probe(...) with its handlers).
    // An error found while building it (a null function, a virtual member function) makes the
    // commit fail with that error.
    template <typename Builder>
    Batch &add(Builder &&b)
    {
        auto block = std::forward<Builder>(b).prepare();
        if constexpr (std::is_same_v<decltype(block), detail::Owned>) {
            blocks_.push_back(std::move(block));
        } else if (block) {
            blocks_.push_back(std::move(*block));
        } else if (!error_) {
            error_ = Error{block.error().code,
                           "probe " + std::to_string(blocks_.size() + failed_) + ": " + block.error().reason};
            ++failed_;
        }
        return *this;
    }

    std::size_t size() const noexcept { return blocks_.size() + failed_; }

    // Registers every probe added, in the order added, or none. The Batch is empty afterwards.
    Result<std::vector<Probe>> commit()
    {
        std::vector<detail::Owned> blocks = std::move(blocks_);
        blocks_.clear();
        std::size_t failed = std::exchange(failed_, 0);
        if (error_) return std::exchange(error_, std::nullopt).value();
        if (blocks.empty() && failed == 0) return Error{-EINVAL, "the batch is empty"};
        std::vector<struct kprobe *> kps;
        std::vector<struct kretprobe *> rps;
        for (auto &b : blocks) {
            if (b.get()->kind == detail::Kind::kprobe)
                kps.push_back(&b.get()->kp);
            else
                rps.push_back(&b.get()->rp);
        }
        if (!kps.empty()) {
            int r = register_kprobes(kps.data(), static_cast<int>(kps.size()));
            if (r < 0) return detail::last_error(r);
        }
        if (!rps.empty()) {
            int r = register_kretprobes(rps.data(), static_cast<int>(rps.size()));
            if (r < 0) {
                Error e = detail::last_error(r);
                if (!kps.empty()) unregister_kprobes(kps.data(), static_cast<int>(kps.size()));
                return e;
            }
        }
        std::vector<Probe> out;
        out.reserve(blocks.size());
        for (auto &b : blocks) out.push_back(detail::adopt(std::move(b)));
        return out;
    }

    // Drops every probe added (nothing was registered).
    void clear() noexcept
    {
        blocks_.clear();
        error_.reset();
        failed_ = 0;
    }

private:
    std::vector<detail::Owned> blocks_;
    std::optional<Error> error_;
    std::size_t failed_ = 0;
};

}  // namespace liveprobe
