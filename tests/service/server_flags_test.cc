// ServerConfigFromFlags carries every transport flag into the ServerConfig, defaults come from
// TransportLimits/ServerConfig (one place each), and values gRPC cannot take are refused naming
// the flag. The flags are set through Abseil's own parser, as a command line would set them.
#include "service/server_flags.h"

#include <string>
#include <vector>

#include "absl/flags/reflection.h"
#include "absl/flags/commandlineflag.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace looptool::service {
namespace {

// Parses `value` into flag `name` as the command line would; the parser's error otherwise.
std::string Set(const std::string& name, const std::string& value) {
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  if (flag == nullptr) return "no flag " + name;
  std::string error;
  return flag->ParseFrom(value, &error) ? "" : error;
}

class ServerFlags : public ::testing::Test {
  absl::FlagSaver saver_;  // every test leaves the flags as it found them
};

TEST_F(ServerFlags, DefaultsAreTheConfigsDefaults) {
  absl::StatusOr<ServerConfig> config = ServerConfigFromFlags();
  ASSERT_TRUE(config.ok()) << config.status();
  const TransportLimits defaults;
  EXPECT_EQ(config->transport.max_streams, defaults.max_streams);
  EXPECT_EQ(config->transport.max_connections, defaults.max_connections);
  EXPECT_EQ(config->transport.max_connection_idle, defaults.max_connection_idle);
  EXPECT_EQ(config->transport.keepalive_time, defaults.keepalive_time);
  EXPECT_EQ(config->transport.keepalive_timeout, defaults.keepalive_timeout);
  EXPECT_EQ(config->transport.request_timeout, defaults.request_timeout);
  EXPECT_EQ(config->transport.handshake_timeout, defaults.handshake_timeout);
  EXPECT_EQ(config->max_memory_bytes, ServerConfig{}.max_memory_bytes);
  EXPECT_EQ(config->manage_connections, ServerConfig{}.manage_connections);
  EXPECT_EQ(config->bind, "127.0.0.1");
}

TEST_F(ServerFlags, EveryTransportFlagReachesTheConfig) {
  ASSERT_EQ(Set("max_streams_per_connection", "7"), "");
  ASSERT_EQ(Set("max_connections", "33"), "");
  ASSERT_EQ(Set("max_connection_idle", "12.5"), "");
  ASSERT_EQ(Set("keepalive_time", "3"), "");
  ASSERT_EQ(Set("keepalive_timeout", "0.25"), "");
  ASSERT_EQ(Set("request_timeout", "7.5"), "");
  ASSERT_EQ(Set("handshake_timeout", "4"), "");
  ASSERT_EQ(Set("max_transport_memory_mb", "64"), "");
  ASSERT_EQ(Set("manage_connections", "false"), "");
  ASSERT_EQ(Set("client_gone_grace", "0"), "");
  absl::StatusOr<ServerConfig> config = ServerConfigFromFlags();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->transport.max_streams, 7);
  EXPECT_EQ(config->transport.max_connections, 33);
  EXPECT_EQ(config->transport.max_connection_idle, absl::Milliseconds(12500));
  EXPECT_EQ(config->transport.keepalive_time, absl::Seconds(3));
  EXPECT_EQ(config->transport.keepalive_timeout, absl::Milliseconds(250));
  EXPECT_EQ(config->transport.request_timeout, absl::Milliseconds(7500));
  EXPECT_EQ(config->transport.handshake_timeout, absl::Seconds(4));
  EXPECT_EQ(config->max_memory_bytes, size_t{64} << 20);
  EXPECT_FALSE(config->manage_connections);
  EXPECT_EQ(config->client_gone_grace, absl::ZeroDuration());
}

TEST_F(ServerFlags, StreamStoresReachTheWorkers) {
  absl::StatusOr<ServerConfig> config = ServerConfigFromFlags();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->workers.stream_output_min_bytes, 0);  // off unless asked for
  ASSERT_EQ(Set("stream_stores_min_bytes", "2097152"), "");
  config = ServerConfigFromFlags();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->workers.stream_output_min_bytes, 2097152);
  EXPECT_THAT(Set("stream_stores_min_bytes", "-1"), ::testing::HasSubstr("must be 0 or more"));
  EXPECT_THAT(Set("stream_stores_min_bytes", "2.5"), ::testing::HasSubstr("is not a number"));
}

TEST_F(ServerFlags, ValuesOutOfRangeAreRefusedNamingWhatIsWrong) {
  for (const char* name : {"max_streams_per_connection", "max_connections",
                           "max_transport_memory_mb", "keepalive_time", "handshake_timeout",
                           "request_timeout"}) {
    EXPECT_THAT(Set(name, "0"), ::testing::Not(::testing::IsEmpty())) << name;
    EXPECT_THAT(Set(name, "-3"), ::testing::Not(::testing::IsEmpty())) << name;
  }
  EXPECT_THAT(Set("max_connections", "many"), ::testing::Not(::testing::IsEmpty()));
  // Parsed, but under gRPC's millisecond resolution: refused when the config is assembled.
  ASSERT_EQ(Set("keepalive_timeout", "0.0004"), "");
  absl::StatusOr<ServerConfig> config = ServerConfigFromFlags();
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()),
              ::testing::HasSubstr("--keepalive_timeout must be at least 0.001 s"));
}

}  // namespace
}  // namespace looptool::service
