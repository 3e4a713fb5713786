// Http2StreamGuard on hand-made HTTP/2 byte streams: the preface, streams opened by the client's
// HEADERS and closed by a reset or the server's END_STREAM, the limit broken by one stream more,
// and the same verdicts however the bytes are cut into pieces.
#include "service/http2_stream_guard.h"

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/service/http2_frames.h"

namespace looptool::service {
namespace {

using testing::Frame;
using testing::kAck;
using testing::kContinuation;
using testing::kData;
using testing::kEndHeaders;
using testing::kEndStream;
using testing::kHeaders;
using testing::kSettings;
constexpr uint8_t kRst = testing::kRstStream;

std::string Start() { return testing::kHttp2Preface + Frame(kSettings, 0, 0, std::string(6, '\0')); }
std::string Open(uint32_t stream) { return Frame(kHeaders, kEndHeaders, stream, "hpack"); }

TEST(Http2StreamGuard, AWrongPrefaceIsNotHttp2) {
  Http2StreamGuard guard(4);
  EXPECT_TRUE(guard.FromClient("PRI * HTTP/2"));
  EXPECT_FALSE(guard.FromClient(".1\r\n"));
  EXPECT_EQ(guard.violation(), "not HTTP/2: the connection preface is wrong");
  EXPECT_FALSE(guard.FromClient(Frame(kSettings, kAck, 0)));  // stays broken
  Http2StreamGuard http1(4);
  EXPECT_FALSE(http1.FromClient("GET / HTTP/1.1\r\n\r\n"));
}

TEST(Http2StreamGuard, ThePrefaceIsCompleteOnlyOnceAllOfItArrived) {
  Http2StreamGuard guard(4);
  EXPECT_FALSE(guard.preface_complete());
  ASSERT_TRUE(guard.FromClient(testing::kHttp2Preface.substr(0, 23)));
  EXPECT_FALSE(guard.preface_complete());
  ASSERT_TRUE(guard.FromClient(testing::kHttp2Preface.substr(23)));
  EXPECT_TRUE(guard.preface_complete());
  ASSERT_TRUE(guard.FromClient(Frame(kSettings, 0, 0)));
  EXPECT_TRUE(guard.preface_complete());
  Http2StreamGuard wrong(4);
  EXPECT_FALSE(wrong.FromClient(std::string(24, 'x')));
  EXPECT_FALSE(wrong.preface_complete());
}

TEST(Http2StreamGuard, OneStreamMoreThanTheLimitBreaksIt) {
  Http2StreamGuard guard(3);
  ASSERT_TRUE(guard.FromClient(Start() + Open(1) + Open(3) + Open(5)));
  EXPECT_EQ(guard.open_streams(), 3);
  EXPECT_FALSE(guard.broken());
  EXPECT_FALSE(guard.FromClient(Open(7)));
  EXPECT_EQ(guard.violation(), "more than 3 streams open at once (stream 7, 4 started)");
}

TEST(Http2StreamGuard, TheServersEndOfAStreamOrAResetFreesItsPlace) {
  Http2StreamGuard guard(2);
  ASSERT_TRUE(guard.FromClient(Start() + Open(1) + Frame(kData, kEndStream, 1, "req") + Open(3)));
  EXPECT_EQ(guard.open_streams(), 2);
  // The server's headers and data without END_STREAM leave stream 1 open; its trailers end it.
  guard.FromServer(Frame(kSettings, 0, 0) + Frame(kHeaders, kEndHeaders, 1, "h") +
                   Frame(kData, 0, 1, "reply"));
  EXPECT_EQ(guard.open_streams(), 2);
  guard.FromServer(Frame(kHeaders, kEndHeaders | kEndStream, 1, "trailers"));
  EXPECT_EQ(guard.open_streams(), 1);
  ASSERT_TRUE(guard.FromClient(Open(5)));
  // A reset from either side ends a stream.
  ASSERT_TRUE(guard.FromClient(Frame(kRst, 0, 3, std::string(4, '\0')) + Open(7)));
  guard.FromServer(Frame(kRst, 0, 5, std::string(4, '\0')));
  ASSERT_TRUE(guard.FromClient(Open(9)));
  EXPECT_EQ(guard.open_streams(), 2);
  EXPECT_EQ(guard.streams_started(), 5);
  EXPECT_FALSE(guard.FromClient(Open(11)));
}

TEST(Http2StreamGuard, OnlyTheHeadersThatStartAClientStreamCount) {
  Http2StreamGuard guard(1);
  ASSERT_TRUE(guard.FromClient(Start() + Open(1)));
  // Continuations, trailers on the open stream, a stream id not above the last, an even id, and
  // a DATA payload that holds what looks like a HEADERS frame open nothing.
  ASSERT_TRUE(guard.FromClient(Frame(kContinuation, kEndHeaders, 1, "more") +
                               Frame(kHeaders, kEndStream | kEndHeaders, 1, "trailers") +
                               Frame(kHeaders, kEndHeaders, 1, "again") + Open(2) +
                               Frame(kData, 0, 1, Open(3) + Open(5))));
  EXPECT_EQ(guard.open_streams(), 1);
  EXPECT_EQ(guard.streams_started(), 1);
  EXPECT_FALSE(guard.FromClient(Open(3)));
}

TEST(Http2StreamGuard, VerdictsDoNotDependOnHowTheBytesArriveInPieces) {
  const std::string client = Start() + Open(1) + Frame(kData, kEndStream, 1, std::string(300, 'x')) +
                             Open(3) + Open(5) + Open(7);
  const std::string server = Frame(kHeaders, kEndStream | kEndHeaders, 1, "trailers");
  for (size_t piece : {size_t{1}, size_t{2}, size_t{5}, size_t{9}, size_t{100}}) {
    Http2StreamGuard guard(3);
    bool ok = true;
    // The server's answer to stream 1 arrives before the client's stream 7.
    const size_t before_seven = client.size() - Open(7).size();
    for (size_t at = 0; at < before_seven; at += piece) {
      ok = guard.FromClient(client.substr(at, std::min(piece, before_seven - at))) && ok;
    }
    for (size_t at = 0; at < server.size(); at += piece) guard.FromServer(server.substr(at, piece));
    for (size_t at = before_seven; at < client.size(); at += piece) {
      ok = guard.FromClient(client.substr(at, std::min(piece, client.size() - at))) && ok;
    }
    EXPECT_TRUE(ok) << "pieces of " << piece;
    EXPECT_EQ(guard.open_streams(), 3) << "pieces of " << piece;
    EXPECT_FALSE(guard.FromClient(Open(9))) << "pieces of " << piece;
  }
}

TEST(Http2StreamGuard, ARequestIsUnfinishedUntilTheClientEndsItsSide) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  Http2StreamGuard guard(8);
  ASSERT_TRUE(guard.FromClient(Start(), t0));
  EXPECT_EQ(guard.OldestUnfinishedRequest(), std::nullopt);
  ASSERT_TRUE(guard.FromClient(Open(1), t0));
  ASSERT_TRUE(guard.FromClient(Open(3) + Frame(kData, 0, 3, "part"), t0 + absl::Seconds(1)));
  ASSERT_TRUE(guard.FromClient(Frame(kHeaders, kEndHeaders | kEndStream, 5, "get"),
                               t0 + absl::Seconds(2)));  // a request of headers alone
  EXPECT_EQ(guard.OldestUnfinishedRequest(), t0);
  ASSERT_TRUE(guard.FromClient(Frame(kData, kEndStream, 1, "rest"), t0 + absl::Seconds(3)));
  EXPECT_EQ(guard.OldestUnfinishedRequest(), t0 + absl::Seconds(1));
  guard.FromServer(Frame(kRst, 0, 3, std::string(4, '\0')));  // the server gave up on it
  EXPECT_EQ(guard.OldestUnfinishedRequest(), std::nullopt);
  EXPECT_EQ(guard.open_streams(), 2);  // 1 and 5 wait for their answers
}

}  // namespace
}  // namespace looptool::service
