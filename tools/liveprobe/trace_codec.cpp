// The events of a trace file, format 3 (trace_codec.hpp).
#include "trace_codec.hpp"

#include <cstring>

namespace liveprobe::tool {
namespace {

// Tag bytes (not named kHeader...: TraceDecoder::Step's names would hide them in its members).
constexpr uint8_t kTagOtherThread = 0, kTagSameThread = 1, kTagHeader = 2, kTagProcess = 3;
constexpr uint32_t kMaxHeader = 1u << 30;

char *put_varint(char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = static_cast<char>((v & 0x7f) | 0x80);
        v >>= 7;
    }
    *p++ = static_cast<char>(v);
    return p;
}

uint64_t zigzag(uint64_t v) { return (v << 1) ^ (0 - (v >> 63)); }
uint64_t unzigzag(uint64_t v) { return (v >> 1) ^ (0 - (v & 1)); }

bool get_varint(FILE *f, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        int c = getc_unlocked(f);
        if (c == EOF) return false;
        x |= uint64_t(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;  // more than 10 bytes: not a varint of this format
}

}  // namespace

char *TraceEncoder::event(const trace::Record &r, uint32_t pid, const char *values, size_t bytes, char *out)
{
    char *p = out;
    if (pid != pid_) {  // rare: a forked child's events, or its parent's again after them
        p = put_varint(p, kTagProcess);
        p = put_varint(p, pid);
        pid_ = pid;
    }
    const bool same = r.tid == tid_;
    p = put_varint(p, uint64_t{r.probe} << 2 | (same ? kTagSameThread : kTagOtherThread));
    if (!same) p = put_varint(p, r.tid);
    p = put_varint(p, zigzag(r.exit_ns - exit_));
    p = put_varint(p, r.exit_ns - r.entry_ns);
    p = put_varint(p, zigzag(r.retval));
    if (bytes) {
        std::memcpy(p, values, bytes);
        p += bytes;
    }
    tid_ = r.tid;
    exit_ = r.exit_ns;
    return p;
}

void TraceEncoder::event(const trace::Record &r, uint32_t pid, const char *values, size_t bytes, std::string *out)
{
    const size_t at = out->size();
    out->resize(at + kMaxEventBytes + bytes);
    out->resize(static_cast<size_t>(event(r, pid, values, bytes, out->data() + at) - out->data()));
}

void TraceEncoder::header(const std::string &header, std::string *out)
{
    const auto n = static_cast<uint32_t>(header.size());
    out->push_back(static_cast<char>(kTagHeader));
    out->append(reinterpret_cast<const char *>(&n), sizeof n);
    out->append(header);
}

TraceDecoder::Step TraceDecoder::next(FILE *f, trace::Record *r, std::string *header)
{
    uint64_t first = 0;
    if (const int c = getc_unlocked(f); c == EOF) {
        return kEnd;
    } else {
        ungetc(c, f);
    }
    if (!get_varint(f, &first)) return kBad;
    uint64_t tag = first & 3, probe = first >> 2;
    if (tag == kTagProcess) {  // the process of the events after it, then the next item
        uint64_t pid = 0;
        if (probe != 0 || !get_varint(f, &pid) || pid > INT32_MAX || !get_varint(f, &first)) return kBad;
        pid_ = static_cast<uint32_t>(pid);
        tag = first & 3, probe = first >> 2;
        if (tag == kTagProcess || tag == kTagHeader) return kBad;  // the writer puts an event next
    }
    if (tag == kTagHeader) {
        uint32_t n = 0;
        if (probe != 0 || std::fread(&n, sizeof n, 1, f) != 1 || n > kMaxHeader) return kBad;
        header->clear();
        return read_exactly(f, n, header) ? kHeader : kBad;
    }
    if ((tag != kTagOtherThread && tag != kTagSameThread) || probe > UINT32_MAX) return kBad;
    uint64_t tid = tid_, dexit = 0, took = 0, ret = 0;
    if (tag == kTagOtherThread && (!get_varint(f, &tid) || tid > UINT32_MAX)) return kBad;
    if (!get_varint(f, &dexit) || !get_varint(f, &took) || !get_varint(f, &ret)) return kBad;
    tid_ = static_cast<uint32_t>(tid);
    exit_ += unzigzag(dexit);
    r->probe = static_cast<uint32_t>(probe);
    r->tid = tid_;
    r->exit_ns = exit_;
    r->entry_ns = exit_ - took;
    r->retval = unzigzag(ret);
    return kEvent;
}

bool TraceDecoder::values(FILE *f, size_t bytes, std::string *out)
{
    out->clear();
    return read_exactly(f, bytes, out);
}

bool read_exactly(FILE *f, size_t n, std::string *out)
{
    char chunk[65536];
    while (n > 0) {
        const size_t want = n < sizeof chunk ? n : sizeof chunk;
        const size_t got = std::fread(chunk, 1, want, f);
        out->append(chunk, got);
        if (got != want) return false;
        n -= got;
    }
    return true;
}

}  // namespace liveprobe::tool
