// What the tool prints of another process's text (issue 32, item 2): agent/channel.hpp
// escape_controls, which request() applies to every reply line and reason.
#include <gtest/gtest.h>

#include "agent/channel.hpp"

using liveprobe::agent::escape_controls;

TEST(EscapeControls, PlainTextAndUtf8PassUnchanged)
{
    EXPECT_EQ(escape_controls("probe 0x401000 nap hits=3\tok"), "probe 0x401000 nap hits=3\tok");
    EXPECT_EQ(escape_controls("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");
}

TEST(EscapeControls, TerminalEscapesAreShownNotSent)
{
    // A window title (OSC), a colour (CSI), a bell, DEL.
    EXPECT_EQ(escape_controls("a\x1b]0;owned\x07z"), "a\\x1b]0;owned\\x07z");
    EXPECT_EQ(escape_controls("\x1b[31mred"), "\\x1b[31mred");
    EXPECT_EQ(escape_controls(std::string("nul\0here", 8)), "nul\\x00here");
    EXPECT_EQ(escape_controls("del\x7f"), "del\\x7f");
    EXPECT_EQ(escape_controls("cr\rlf\n"), "cr\\x0dlf\\x0a");
}

TEST(EscapeControls, C1ControlsInUtf8AreEscaped)
{
    // U+009B, CSI as one character: some terminals act on it.
    EXPECT_EQ(escape_controls("x\xc2\x9b" "31m"), "x\\xc2\\x9b31m");
    EXPECT_EQ(escape_controls("\xc2\xa0"), "\xc2\xa0");  // U+00A0 is printable
    EXPECT_EQ(escape_controls("end\xc2"), "end\xc2");      // a truncated sequence, left as it is
}
