// The unwind table of the loaded objects (unwind_table.hpp).
#include "arch/x86_64/unwind_table.hpp"

#include <elf.h>
#include <link.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "arch/x86_64/stack_walk.hpp"
#include "symbols/cfi_rows.hpp"

namespace liveprobe::arch {
namespace {

constexpr uint32_t kDwarfRbp = 6, kDwarfRsp = 7, kDwarfRa = 16;  // the x86-64 psABI's DWARF numbers

struct Object {
    std::string path;
    uint64_t bias = 0;
    const unsigned char *eh_frame_hdr = nullptr;  // in memory, where the loader mapped it
};

int collect(struct dl_phdr_info *info, size_t, void *arg)
{
    Object o;
    o.bias = info->dlpi_addr;
    const std::string name = info->dlpi_name ? info->dlpi_name : "";
    if (name.empty()) o.path = "/proc/self/exe";
    else if (name[0] == '/') o.path = name;
    else return 0;  // the vDSO (no file): its frames by frame pointers
    for (int i = 0; i < info->dlpi_phnum; ++i)
        if (info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME)
            o.eh_frame_hdr = reinterpret_cast<const unsigned char *>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (o.eh_frame_hdr) static_cast<std::vector<Object> *>(arg)->push_back(o);
    return 0;
}

// The FDEs' start addresses (runtime) the .eh_frame_hdr's search table lists: only the table
// GNU ld and lld write (version 1, a udata4 count, datarel sdata4 pairs); none otherwise.
std::vector<uint64_t> fde_starts(const unsigned char *hdr)
{
    std::vector<uint64_t> starts;
    if (hdr[0] != 1 || hdr[2] != 0x03 || hdr[3] != 0x3b) return starts;
    size_t at = 4;
    if (hdr[1] == 0x1b || hdr[1] == 0x03) at += 4;  // eh_frame_ptr: pcrel or absolute udata4
    else return starts;
    uint32_t count;
    std::memcpy(&count, hdr + at, 4);
    at += 4;
    for (uint32_t i = 0; i < count; ++i, at += 8) {
        int32_t loc;
        std::memcpy(&loc, hdr + at, 4);
        starts.push_back(reinterpret_cast<uint64_t>(hdr) + static_cast<int64_t>(loc));
    }
    return starts;
}

// Rows of one object, at runtime addresses, each range's end marked by a row with no CFI.
void add_rows(const Object &o, std::vector<UnwindRow> *rows)
{
    std::vector<uint64_t> starts = fde_starts(o.eh_frame_hdr);
    for (uint64_t &s : starts) s -= o.bias;  // file addresses, as libdw reads the file
    std::vector<symbols::CfiRow> cfi;
    if (starts.empty() || !symbols::cfi_rows(o.path, starts, kDwarfRbp, kDwarfRa, &cfi)) return;
    for (size_t i = 0; i < cfi.size(); ++i) {
        const symbols::CfiRow &c = cfi[i];
        UnwindRow r{};
        r.pc = c.start + o.bias;
        const bool fits = c.cfa_off >= INT32_MIN && c.cfa_off <= INT32_MAX && c.saved_off >= INT16_MIN && c.saved_off <= INT16_MAX;
        // A CFA the walk cannot follow (an expression, as a signal frame's restorer has, or
        // another register) ends the stack there: frame pointers are for code with no CFI, and
        // through a signal frame they read the interrupted code's data as a return address.
        const bool followed = c.cfa_known && fits && (c.cfa_reg == kDwarfRsp || c.cfa_reg == kDwarfRbp);
        r.cfa = c.outermost || !followed ? UnwindRow::kEnd : c.cfa_reg == kDwarfRsp ? UnwindRow::kSp : UnwindRow::kBp;
        r.cfa_off = fits ? static_cast<int32_t>(c.cfa_off) : 0;
        r.bp = c.saved == symbols::CfiRow::Saved::same     ? UnwindRow::kBpSame
               : c.saved == symbols::CfiRow::Saved::at_cfa ? UnwindRow::kBpAtCfa
                                                           : UnwindRow::kBpLost;
        r.bp_off = fits ? static_cast<int16_t>(c.saved_off) : 0;
        rows->push_back(r);
        if (i + 1 == cfi.size() || cfi[i + 1].start != c.end) {
            UnwindRow gap{};
            gap.pc = c.end + o.bias;
            gap.cfa = UnwindRow::kNone;
            rows->push_back(gap);
        }
    }
}

// The page index of sorted rows (stack_walk.hpp's UnwindPage): every page a row with CFI
// covers, with the rows that start in it and the one covering its first byte.
std::vector<UnwindPage> page_index(const std::vector<UnwindRow> &rows)
{
    std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> pages;
    for (size_t i = 0; i < rows.size(); ++i) {
        if (rows[i].cfa == UnwindRow::kNone) continue;
        const uint64_t end = i + 1 < rows.size() ? rows[i + 1].pc : rows[i].pc + 1;
        for (uint64_t p = rows[i].pc >> 12; p <= (end - 1) >> 12; ++p) {
            auto it = pages.try_emplace(p, static_cast<uint32_t>(i), static_cast<uint32_t>(i)).first;
            it->second.second = static_cast<uint32_t>(i);  // (first: set back to the page's start below)
        }
    }
    // Rows of no CFI (kNone) starting in an indexed page count too: a lookup must find them.
    for (size_t i = 0; i < rows.size(); ++i)
        if (rows[i].cfa == UnwindRow::kNone)
            if (auto it = pages.find(rows[i].pc >> 12); it != pages.end()) {
                it->second.first = std::min<uint32_t>(it->second.first, static_cast<uint32_t>(i));
                it->second.second = std::max<uint32_t>(it->second.second, static_cast<uint32_t>(i));
            }
    // lo: the row covering the page's first byte (or the first in it, when none does).
    for (auto &[p, range] : pages) {
        uint32_t lo = range.first;
        while (lo > 0 && rows[lo].pc > (p << 12)) --lo;
        range.first = lo;
    }
    size_t slots = 16;
    while (slots < 2 * pages.size()) slots *= 2;
    std::vector<UnwindPage> table(slots, UnwindPage{0, 0, 0});
    for (const auto &[p, range] : pages) {
        uint64_t i = unwind_page_hash(p) & (slots - 1);
        while (table[i].page != 0) i = (i + 1) & (slots - 1);
        table[i] = {p, range.first, range.second};
    }
    return table;
}

std::mutex g_mu;
unsigned long long g_built_adds = 0, g_built_subs = 0;  // under g_mu: the objects of the table

int counts(struct dl_phdr_info *info, size_t size, void *arg)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        auto *c = static_cast<unsigned long long *>(arg);
        c[0] = info->dlpi_adds;
        c[1] = info->dlpi_subs;
    }
    return 1;
}

}  // namespace

size_t build_unwind_table()
{
    std::lock_guard lk(g_mu);
    unsigned long long c[2] = {0, 0};
    dl_iterate_phdr(counts, c);
    const UnwindTable *now = g_unwind_table.load(std::memory_order_acquire);
    if (now && c[0] == g_built_adds && c[1] == g_built_subs) return now->n;
    std::vector<Object> objects;
    dl_iterate_phdr(collect, &objects);
    std::vector<UnwindRow> rows;
    for (const Object &o : objects) add_rows(o, &rows);
    std::stable_sort(rows.begin(), rows.end(), [](const UnwindRow &a, const UnwindRow &b) { return a.pc < b.pc; });
    // Kept for the life of the process: a walk may read the table it loaded while the next is
    // published (one per change of the loaded objects).
    auto *copy = new UnwindRow[rows.size() ? rows.size() : 1];
    std::copy(rows.begin(), rows.end(), copy);
    const std::vector<UnwindPage> pages = page_index(rows);
    auto *index = new UnwindPage[pages.size()];
    std::copy(pages.begin(), pages.end(), index);
    g_unwind_table.store(new UnwindTable{copy, rows.size(), index, pages.size() - 1}, std::memory_order_release);
    g_built_adds = c[0];
    g_built_subs = c[1];
    return rows.size();
}

}  // namespace liveprobe::arch
