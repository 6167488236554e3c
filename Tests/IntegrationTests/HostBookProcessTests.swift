import Foundation
import GRDB
import Testing

/// The host book shared by farcast processes: two of them adding hosts at the same moment lose
/// nothing and corrupt nothing (WAL, writers wait for each other); an export imports back into
/// an empty book as it was; and a password saved with a host is nowhere in the database's bytes.
@Suite(.tags(.groupB), .serialized, .timeLimit(.minutes(3)))
struct HostBookProcessTests {
    static func environment(_ folder: TemporaryFolder) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_DATA_HOME"] = folder.path + "/data"
        environment["XDG_STATE_HOME"] = folder.path + "/state"
        environment["FARCAST_SECRET_STORE"] = "file"
        return environment
    }

    @Test func twoProcessesWritingAtOnceLoseNothing() async throws {
        let folder = try TemporaryFolder()
        let environment = Self.environment(folder)
        let farcast = try farcastBinary()
        // Each process adds 25 hosts, one farcast invocation after another, both at once.
        let script = """
            for i in $(seq 1 25); do "$0" hosts add "$1-$i" "vnc://$1-$i.example:59$((i+10))" --quality $((i % 10)) || exit 1; done
            """
        let writers = try ["alpha", "beta"].map { prefix in
            try BackgroundProcess("/bin/sh", ["-c", script, farcast, prefix], environment: environment, logName: "hosts-writer-\(prefix)")
        }
        for writer in writers {
            #expect(writer.waitForExit(timeout: 120), "a writer hung")
            #expect(writer.terminationStatus == 0, "\(writer.log)")
        }
        let listed = try run(farcast, ["hosts", "ls", "--json"], environment: environment)
        #expect(listed.status == 0, "\(listed.stderr)")
        let hosts = try jsonItems(listed.stdout)
        #expect(hosts.count == 50)
        #expect(Set(hosts.compactMap { $0["name"] as? String }).count == 50)
        let integrity = try await DatabaseQueue(path: folder.path + "/data/farcast/hosts.sqlite").read {
            try String.fetchOne($0, sql: "PRAGMA integrity_check")
        }
        #expect(integrity == "ok")
    }

    @Test func exportImportRoundTripsAndSecretsStayOutOfTheDatabase() async throws {
        let folder = try TemporaryFolder()
        let environment = Self.environment(folder)
        let farcast = try farcastBinary()
        let secret = "pw-\(UUID().uuidString)"
        let passwordFile = folder.path + "/pw"
        try (secret + "\n").write(toFile: passwordFile, atomically: true, encoding: .utf8)
        chmod(passwordFile, 0o600)
        for arguments in [
            ["hosts", "add", "office", "vnc://alice@10.0.0.5:5901", "--ssh", "me@bastion:2222", "--quality", "6", "--view-only", "true",
             "--notes", "third floor", "--password-file", passwordFile],
            ["hosts", "add", "kitchen", "sendspin://kitchen.local", "--output-device", "hw:1"],
            ["hosts", "add", "media", "jellyfins://media.example/jf", "--bitrate", "8000"],
            ["hosts", "add", "gamebox", "punktfunk://10.0.0.7"],
        ] {
            let result = try run(farcast, arguments, environment: environment)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
        }
        // The password is in the 0600 secret file, and in no byte of the book.
        let database = folder.path + "/data/farcast"
        for file in (try? FileManager.default.contentsOfDirectory(atPath: database)) ?? [] {
            let bytes = FileManager.default.contents(atPath: database + "/" + file) ?? Data()
            #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(file) holds the password")
        }
        let secrets = try String(contentsOfFile: folder.path + "/state/farcast/secrets.json", encoding: .utf8)
        #expect(secrets.contains(secret))

        let before = try run(farcast, ["hosts", "ls", "--json"], environment: environment).stdout
        let exportPath = folder.path + "/hosts.json"
        let export = try run(farcast, ["hosts", "export", "-o", exportPath], environment: environment)
        #expect(export.status == 0, "\(export.stderr)")
        let exported = try String(contentsOfFile: exportPath, encoding: .utf8)
        #expect(!exported.contains(secret), "an export has no secrets unless asked")
        #expect(try FileManager.default.attributesOfItem(atPath: exportPath)[.posixPermissions] as? Int == 0o600)

        // Into an empty book elsewhere: the same listing.
        let other = try TemporaryFolder()
        let otherEnvironment = Self.environment(other)
        let imported = try run(farcast, ["hosts", "import", exportPath], environment: otherEnvironment)
        #expect(imported.status == 0, "\(imported.stderr)")
        let after = try run(farcast, ["hosts", "ls", "--json"], environment: otherEnvironment).stdout
        #expect(after == before)
        // A second import collides, and says so; --replace overwrites.
        let again = try run(farcast, ["hosts", "import", exportPath], environment: otherEnvironment)
        #expect(again.status == 1 && again.stderr.contains("already saved"))
        #expect(try run(farcast, ["hosts", "import", exportPath, "--replace"], environment: otherEnvironment).status == 0)

        // With --with-secrets the password travels too.
        let withSecrets = try run(farcast, ["hosts", "export", "--with-secrets"], environment: environment)
        #expect(withSecrets.stdout.contains(secret))
        let show = try run(farcast, ["hosts", "show", "office", "--json"], environment: environment)
        #expect(show.stdout.contains("\"has_secret\":true"))
        #expect(show.stdout.contains("\"view_only\":true") || show.stdout.contains("\"viewOnly\":true"))
    }

    @Test func badInputIsAUsageErrorBeforeAnything() throws {
        let folder = try TemporaryFolder()
        let environment = Self.environment(folder)
        let farcast = try farcastBinary()
        for arguments in [["hosts", "add", "a/b", "vnc://x"], ["hosts", "add", "x", "gopher://x"], ["hosts", "add", "x", "punktfunk://x", "--ssh", "me@b"],
                          ["hosts", "add", "x", "vnc://x", "--quality", "12"], ["vnc", "info", "vnc://x?ssh=me@b:99999"]] {
            let result = try run(farcast, arguments, environment: environment)
            #expect(result.status == 2, "\(arguments): \(result.stderr)")
            #expect(result.stderr.hasPrefix("farcast: ") && result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
        }
        let missing = try run(farcast, ["hosts", "show", "nobody"], environment: environment)
        #expect(missing.status == 1 && missing.stderr.contains("no saved host is named 'nobody'"))
    }

    /// A saved name stands for its address in each protocol's commands (port 9 on loopback has
    /// no listener, so each command fails at run time naming the saved address), and a name of
    /// another protocol's host is a usage error before anything is sent.
    @Test func savedNamesWorkInEveryProtocolsCommands() throws {
        let folder = try TemporaryFolder()
        let environment = Self.environment(folder)
        let farcast = try farcastBinary()
        for (name, url) in [("gamebox", "punktfunk://127.0.0.1:9"), ("office", "vnc://127.0.0.1:9"), ("kitchen", "sendspin://127.0.0.1:9")] {
            let added = try run(farcast, ["hosts", "add", name, url], environment: environment)
            #expect(added.status == 0, "\(added.stderr)")
        }
        let reached: [([String], String)] = [
            (["punktfunk", "probe", "gamebox", "--timeout", "1"], "127.0.0.1:9"),
            (["vnc", "info", "office", "--timeout", "2"], "127.0.0.1::9"),
            (["sendspin", "play", "kitchen", "--timeout", "2", "--output", "null"], "127.0.0.1:9"),
        ]
        for (arguments, address) in reached {
            let result = try run(farcast, arguments, environment: environment, timeout: 30)
            #expect(result.status == 1, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(address), "\(arguments): \(result.stderr)")
        }
        for arguments in [["punktfunk", "probe", "office"], ["vnc", "info", "gamebox"], ["sendspin", "play", "office"],
                          ["punktfunk", "probe", "me@gamebox"], ["punktfunk", "probe", "gamebox:0"],
                          ["punktfunk", "probe", "gamebox", "--ssh", "me@bastion"]] {
            let result = try run(farcast, arguments, environment: environment)
            #expect(result.status == 2, "\(arguments): \(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
            if arguments.contains("--ssh") { #expect(result.stderr.contains("UDP"), "\(result.stderr)") }
        }
    }

    /// docs/hosts.md's "Every protocol by a saved name, on one machine", run exactly as written
    /// (bash -e from the checkout, this build's farcast first on PATH): each protocol's real
    /// peer or stand-in is reached by a saved name, and the book shows what using them left.
    @Test func theDocsRecipeReachesEveryProtocolByASavedName() throws {
        let docs = try String(contentsOf: packageRoot.appendingPathComponent("docs/hosts.md"), encoding: .utf8)
        let section = try #require(docs.range(of: "### Every protocol by a saved name, on one machine"), "docs/hosts.md lost its recipe")
        let rest = docs[section.upperBound...]
        let open = try #require(rest.range(of: "```\n"))
        let close = try #require(rest[open.upperBound...].range(of: "```"))
        let folder = try TemporaryFolder()
        try FileManager.default.createSymbolicLink(atPath: folder.path + "/farcast", withDestinationPath: try farcastBinary())
        try String(rest[open.upperBound..<close.lowerBound]).write(toFile: folder.path + "/recipe.sh", atomically: true, encoding: .utf8)
        _ = try requireExecutable("Xvnc", package: "tigervnc-standalone-server")
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = folder.path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["TMPDIR"] = folder.path     // where the recipe's mktemp -d goes, so its files can be checked
        // Its own session, so whatever it started is ended with it even if it fails half-way.
        let recipe = try BackgroundProcess("/bin/bash", ["-c", "cd \"$1\" && exec bash -e \"$2\"", "recipe", packageRoot.path, folder.path + "/recipe.sh"],
                                           environment: environment, logName: "hosts-recipe", newSession: true)
        defer { kill(-recipe.pid, SIGKILL) }
        #expect(recipe.waitForExit(timeout: 150), "the recipe did not finish within 150 s: \(recipe.log)")
        let output = recipe.log
        #expect(recipe.terminationStatus == 0, "\(output)")
        for line in ["saved desk: vnc://127.0.0.1:5957", "saved kitchen: sendspin://127.0.0.1:8927", "saved gamebox: punktfunk://127.0.0.1:9777",
                     "saved media: jellyfin://127.0.0.1:8096", "desk.png: 640x480", "(pinned_on_first_use)", "pin           tls 127.0.0.1:9777",
                     "signed in to Farcast Stand-in as demo", "Movies", "saved office: vnc://127.0.0.1:5957", "size              640x480",
                     "removed office"] {
            #expect(output.contains(line), "no \"\(line)\" in:\n\(output)")
        }
        #expect(!output.contains("last used     never"), "probing gamebox by its name marks it used: \(output)")
        let demo = try #require(try FileManager.default.contentsOfDirectory(atPath: folder.path).first { $0.hasPrefix("tmp.") })
        try SendspinServerTests.expectUnbrokenTone(folder.path + "/" + demo + "/kitchen.wav")
        #expect(FileManager.default.fileExists(atPath: folder.path + "/" + demo + "/desk.png"))
    }
}
