@testable import Hosts
import Testing

/// ~/.ssh/config as OpenSSH applies it: first value wins, IdentityFile accumulates, patterns
/// and negations select blocks, tokens expand.
struct SSHConfigTests {
    let config = SSHConfig(text: """
        # comment
        Host office
            HostName 10.0.0.5
            User alice
            Port 2222
            IdentityFile ~/.ssh/office_%r
            ProxyJump jump@gateway.example:2200,second

        Host *.corp !secret.corp
          User corp-user
          IdentityFile=/keys/corp

        Match host something
          User never

        Host *
          User everyone
          Port 22
          UserKnownHostsFile ~/.ssh/known_hosts_farcast
          StrictHostKeyChecking accept-new
        """)

    @Test func firstValueWinsAndIdentityFilesAccumulate() {
        let office = config.settings(for: "office")
        #expect(office.hostName == "10.0.0.5")
        #expect(office.user == "alice")
        #expect(office.port == 2222)
        #expect(office.identityFiles == ["~/.ssh/office_%r"])
        #expect(office.proxyJump == "jump@gateway.example:2200")
        #expect(office.strictHostKeyChecking == "accept-new")
    }

    @Test func patternsNegationsAndMatchBlocks() {
        #expect(config.settings(for: "db.corp").user == "corp-user")
        #expect(config.settings(for: "db.corp").identityFiles == ["/keys/corp"])
        #expect(config.settings(for: "secret.corp").user == "everyone")
        #expect(config.settings(for: "elsewhere").hostName == nil)
    }

    @Test func routesResolveThroughTheConfig() {
        var options = SSHTunnelOptions()
        options.identityFiles = ["/explicit/key"]
        let resolved = ResolvedSSHRoute.resolve(SSHRoute(host: "office"), options: options, config: config)
        #expect(resolved.hostName == "10.0.0.5")
        #expect(resolved.port == 2222)
        #expect(resolved.user == "alice")
        #expect(resolved.identityFiles == ["/explicit/key", SSHPaths.home + "/.ssh/office_alice"])
        #expect(resolved.jump == SSHRoute(user: "jump", host: "gateway.example", port: 2200))
        #expect(resolved.acceptNew)
        #expect(resolved.knownHostsPath == SSHPaths.home + "/.ssh/known_hosts_farcast")
        // What the route says beats the config.
        let explicit = ResolvedSSHRoute.resolve(SSHRoute(user: "bob", host: "office", port: 22), options: SSHTunnelOptions(), config: config)
        #expect(explicit.user == "bob" && explicit.port == 22)
        // Without an IdentityFile, OpenSSH's default files are tried.
        let plain = ResolvedSSHRoute.resolve(SSHRoute(host: "plain"), options: SSHTunnelOptions(), config: SSHConfig(text: ""))
        #expect(plain.identityFiles == SSHPaths.defaultIdentities)
        #expect(plain.user == SSHPaths.localUser && plain.port == 22 && plain.jump == nil && !plain.acceptNew)
    }

    @Test func tokensExpand() {
        #expect(SSHConfig.expand("%d/.ssh/%h-%p-%r-%%", host: "h", port: 22, user: "u", alias: "a") == SSHPaths.home + "/.ssh/h-22-u-%")
        #expect(SSHConfig.expand("~/x", host: "h", port: 22, user: "u", alias: "a") == SSHPaths.home + "/x")
    }
}
