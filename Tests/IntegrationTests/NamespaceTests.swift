import Foundation
import Testing

/// scripts/test runs the integration tests in a network namespace of their own so that no
/// server a test starts can reach beyond loopback. This proves the isolation actually holds.
@Suite(.tags(.groupA)) struct NamespaceTests {
    @Test func integrationTestsSeeOnlyLoopback() throws {
        guard ProcessInfo.processInfo.environment["FARCAST_REQUIRE_NETNS"] == "1" else {
            // Run by hand outside scripts/test: nothing to prove about isolation.
            return
        }
        // /proc/self/net/dev lists the interfaces of this process's own network namespace
        // (/sys/class/net would show the namespace sysfs was mounted in).
        let table = try String(contentsOfFile: "/proc/self/net/dev", encoding: .utf8)
        let interfaces = table.split(separator: "\n").dropFirst(2)
            .compactMap { $0.split(separator: ":").first?.trimmingCharacters(in: .whitespaces) }.sorted()
        #expect(interfaces == ["lo"], "integration tests must run with loopback only, found \(interfaces)")
    }
}
