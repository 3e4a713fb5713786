// LoopToolServer::Start refuses what it cannot start, saying why, and leaves nothing half-built
// behind (its destructor runs on the partly started server).
#include "service/server.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace looptool::service {
namespace {

TEST(ServerStart, AKernelWorkerThatCannotStartIsAnErrorNotACrash) {
  ServerConfig config;
  config.workers.executable = "/nonexistent/looptool-kernel-worker";
  absl::StatusOr<std::unique_ptr<LoopToolServer>> server = LoopToolServer::Start(config);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()),
              ::testing::HasSubstr("/nonexistent/looptool-kernel-worker"));
}

TEST(ServerStart, ANonLoopbackBindWithoutATokenIsRefused) {
  ServerConfig config;
  config.bind = "0.0.0.0";
  absl::StatusOr<std::unique_ptr<LoopToolServer>> server = LoopToolServer::Start(config);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(server.status().message()),
              ::testing::HasSubstr("refusing to listen on 0.0.0.0 without a shared token"));
}

TEST(ServerStart, OnlyLoopbackAddressesAreLoopback) {
  for (const char* bind : {"127.0.0.1", "127.1.2.3", "::1", "[::1]", "::ffff:127.0.0.1",
                           "localhost"}) {
    EXPECT_TRUE(IsLoopback(bind)) << bind;
  }
  for (const char* bind : {"127.evil.example", "127.0.0.1.nip.io", "0.0.0.0", "::", "[::]",
                           "10.0.0.1", "128.0.0.1", "::ffff:10.0.0.1", "localhost.example", "",
                           "127.0.0.1 ", "[127.0.0.1]"}) {
    EXPECT_FALSE(IsLoopback(bind)) << bind;
  }
}

TEST(ServerStart, ANameThatLooksLikeLoopbackNeedsAToken) {
  ServerConfig config;
  config.bind = "127.evil.example";
  absl::StatusOr<std::unique_ptr<LoopToolServer>> server = LoopToolServer::Start(config);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(server.status().message()),
              ::testing::HasSubstr("without a shared token"));
}

}  // namespace
}  // namespace looptool::service
