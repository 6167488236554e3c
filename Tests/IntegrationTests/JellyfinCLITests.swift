import Foundation
import Testing

/// Every `farcast jellyfin` verb against the stand-in server (no real Jellyfin server can run on
/// these machines; see JellyfinStandInServer), as a user runs them: human output, `--json`,
/// exit codes and one-line failures. Each test has a state directory of its own.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct JellyfinCLITests {
    /// A farcast user: their own state and cache folders.
    struct User {
        let folder: TemporaryFolder
        let environment: [String: String]

        init() throws {
            folder = try TemporaryFolder()
            var env = ProcessInfo.processInfo.environment
            env["XDG_STATE_HOME"] = folder.path + "/state"
            env["XDG_CACHE_HOME"] = folder.path + "/cache"
            env["XDG_DATA_HOME"] = folder.path + "/data"
            env["FARCAST_SECRET_STORE"] = "file"
            env.removeValue(forKey: "FARCAST_JELLYFIN_PASSWORD")
            environment = env
        }

        func farcast(_ arguments: [String], timeout: TimeInterval = 60) throws -> ProcessResult {
            try command(["jellyfin"] + arguments, timeout: timeout)
        }

        /// Any farcast command (`hosts …`) as this user.
        func command(_ arguments: [String], timeout: TimeInterval = 60) throws -> ProcessResult {
            try run(try farcastBinary(), arguments, environment: environment, timeout: timeout)
        }

        /// Runs with --json and parses stdout; records the stderr on failure.
        func json(_ arguments: [String]) throws -> Any {
            let result = try farcast(arguments + ["--json"])
            #expect(result.status == 0, "farcast jellyfin \(arguments.joined(separator: " ")): \(result.stderr)")
            return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
        }

        /// Runs a listing with --json: its `items` (the shape is checked too).
        func items(_ arguments: [String]) throws -> [[String: Any]]? {
            let result = try farcast(arguments + ["--json"])
            #expect(result.status == 0, "farcast jellyfin \(arguments.joined(separator: " ")): \(result.stderr)")
            return try jsonItems(result.stdout)
        }

        func login(_ server: JellyfinStandInServer) throws {
            let result = try farcast(["login", server.url, "--user", "demo", "--password-file", try server.passwordFile(in: folder)])
            #expect(result.status == 0, "login: \(result.stderr)")
        }
    }

    /// A parental ceiling (`--max-rating`, or FARCAST_JELLYFIN_MAX_RATING): the stand-in rates
    /// Test Pattern G, Colour Bars PG, Mandelbrot Zoom PG-13. Listings leave out what is above it
    /// (the server filters with maxOfficialRating), search finds nothing of it, and opening it
    /// by id is refused.
    @Test func aRatingCeilingHidesWhatIsAboveIt() throws {
        let server = try JellyfinStandInServer()
        let user = try User()
        try user.login(server)
        let underPG = try user.items(["ls", "Movies", "--max-rating", "PG"])?.compactMap { $0["name"] as? String }
        #expect(underPG == ["Colour Bars", "Test Pattern"])
        let environment = user.environment.merging(["FARCAST_JELLYFIN_MAX_RATING": "G"]) { $1 }
        let underG = try run(try farcastBinary(), ["jellyfin", "ls", "Movies", "--json"], environment: environment)
        #expect(try jsonItems(underG.stdout).compactMap { $0["name"] as? String } == ["Test Pattern"], "\(underG.stderr)")
        #expect(try user.items(["search", "Mandelbrot", "--max-rating", "12"])?.isEmpty == true)
        #expect(try user.items(["search", "Mandelbrot"])?.count == 1, "without a ceiling it is there")
        let id = try #require(try user.items(["ls", "Movies"])?.first { $0["name"] as? String == "Mandelbrot Zoom" }?["id"] as? String)
        let refused = try user.farcast(["info", id, "--max-rating", "PG"])
        #expect(refused.status == 1 && refused.stderr.contains("Mandelbrot Zoom is rated PG-13, above the PG ceiling"), "\(refused.stderr)")
        let bad = try user.farcast(["ls", "Movies", "--max-rating", "banana"])
        #expect(bad.status == 2 && bad.stderr.contains("--max-rating takes a rating or an age"), "\(bad.stderr)")
    }

    @Test func signInBrowseSearchAndSignOut() throws {
        let server = try JellyfinStandInServer()
        let user = try User()

        // login (human output, then servers as JSON)
        let login = try user.farcast(["login", server.url, "--user", "demo", "--password-file", try server.passwordFile(in: user.folder)])
        #expect(login.status == 0, "\(login.stderr)")
        #expect(login.stdout.contains("signed in to Farcast Stand-in as demo"))
        let stateFile = user.folder.path + "/state/farcast/jellyfin/servers.json"
        let mode = (try FileManager.default.attributesOfItem(atPath: stateFile)[.posixPermissions] as? NSNumber)?.intValue
        #expect(mode == 0o600)

        let servers = try user.items(["servers"])
        #expect(servers?.count == 1)
        #expect(servers?.first?["url"] as? String == server.url)
        #expect((servers?.first?["users"] as? [[String: Any]])?.first?["name"] as? String == "demo")
        #expect(!(try String(contentsOfFile: stateFile, encoding: .utf8)).isEmpty)
        let serversText = try user.farcast(["servers"])
        #expect(serversText.stdout.contains("Farcast Stand-in") && !serversText.stdout.contains("token"))

        // libraries
        let libraries = try user.items(["libraries"])
        #expect(libraries?.compactMap { $0["name"] as? String } == ["Movies", "Shows", "Music"])
        let librariesText = try user.farcast(["libraries"])
        #expect(librariesText.stdout.contains("tvshows"))

        // ls: a library, a series (its seasons), everything of a type, sorted and limited
        let movies = try user.json(["ls", "Movies"]) as? [String: Any]
        #expect((movies?["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["Colour Bars", "Mandelbrot Zoom", "Test Pattern"])
        #expect(movies?["total"] as? Int == 3)
        let seasons = try user.json(["ls", "Signal Tests"]) as? [String: Any]
        #expect((seasons?["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["Season 1", "Season 2"])
        // A season's episodes and an album's tracks by their numbers, not by name (E2, E3, E1 before).
        let seasonOne = try user.json(["ls", "Season 1"]) as? [String: Any]
        #expect((seasonOne?["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["Pilot Tone", "Carrier Wave", "Phase Shift"])
        let byName = try user.json(["ls", "Season 1", "--sort", "name"]) as? [String: Any]
        #expect((byName?["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["Carrier Wave", "Phase Shift", "Pilot Tone"])
        let episodes = try user.json(["ls", "--type", "episode", "--sort", "name", "--limit", "2"]) as? [String: Any]
        #expect((episodes?["items"] as? [[String: Any]])?.count == 2)
        #expect(episodes?["total"] as? Int == 5)
        let byYear = try user.json(["ls", "Movies", "--sort", "year", "--descending"]) as? [String: Any]
        #expect((byYear?["items"] as? [[String: Any]])?.compactMap { $0["year"] as? Int } == [2024, 2021, 2019])
        let lsText = try user.farcast(["ls", "--type", "episode"])
        #expect(lsText.status == 0)
        #expect(lsText.stdout.contains("Signal Tests S1E1 Pilot Tone"))
        let album = try user.json(["ls", "Test Tones"]) as? [String: Any]
        #expect((album?["items"] as? [[String: Any]])?.compactMap { $0["type"] as? String } == ["Audio", "Audio", "Audio"])
        #expect((album?["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["A 220", "E 330", "A 440"])
        // The index numbers by kind: a track's disc and number, an episode's season and number,
        // a season's number (audio items carried "season" and "episode" before).
        let tracks = album?["items"] as? [[String: Any]] ?? []
        #expect(tracks.compactMap { $0["track"] as? Int } == [1, 2, 3] && tracks.allSatisfy { $0["disc"] as? Int == 1 })
        #expect(tracks.allSatisfy { $0["season"] == nil && $0["episode"] == nil }, "\(tracks)")
        let episodeRows = seasonOne?["items"] as? [[String: Any]] ?? []
        #expect(episodeRows.compactMap { $0["episode"] as? Int } == [1, 2, 3] && episodeRows.allSatisfy { $0["season"] as? Int == 1 && $0["track"] == nil })
        let seasonRows = seasons?["items"] as? [[String: Any]] ?? []
        #expect(seasonRows.compactMap { $0["season"] as? Int } == [1, 2] && seasonRows.allSatisfy { $0["episode"] == nil })

        // search
        let hits = try user.items(["search", "signal"])
        #expect(hits?.first?["name"] as? String == "Signal Tests")
        #expect(hits?.first?["type"] as? String == "Series")
        let noHits = try user.farcast(["search", "zzzz-nothing"])
        #expect(noHits.status == 0 && noHits.stdout.contains("nothing matches"))

        // info: real probed streams and a real BlurHash
        let info = try user.json(["info", "Test Pattern"]) as? [String: Any]
        #expect(info?["type"] as? String == "Movie")
        #expect(info?["year"] as? Int == 2021)
        let runtime = info?["runtime_seconds"] as? Double ?? 0
        #expect(runtime > 1.5 && runtime < 2.5)
        let streams = info?["streams"] as? [[String: Any]] ?? []
        #expect(streams.contains { $0["type"] as? String == "Video" && $0["codec"] as? String == "h264" && $0["width"] as? Int == 320 })
        #expect(streams.contains { $0["type"] as? String == "Audio" && $0["codec"] as? String == "aac" })
        #expect(((info?["blur_hashes"] as? [String: String])?["Primary"]?.count ?? 0) >= 20)
        let infoText = try user.farcast(["info", "Pilot Tone"])
        #expect(infoText.stdout.contains("Signal Tests, season 1, episode 1"))

        // mark, resume, next-up
        let played = try user.json(["mark", "Pilot Tone", "played"]) as? [String: Any]
        #expect(played?["played"] as? Bool == true)
        let nextUp = try user.items(["next-up"])
        #expect(nextUp?.first?["name"] as? String == "Carrier Wave")
        let favourite = try user.json(["mark", "Test Pattern", "favourite"]) as? [String: Any]
        #expect(favourite?["favourite"] as? Bool == true)
        let favourites = try user.json(["ls", "Movies", "--favourites"]) as? [String: Any]
        #expect((favourites?["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["Test Pattern"])
        let unplayed = try user.json(["mark", "Pilot Tone", "unplayed"]) as? [String: Any]
        #expect(unplayed?["played"] as? Bool == false)
        let colourBars = try user.json(["info", "Colour Bars"]) as? [String: Any]
        try server.hook("/StandIn/Position?item=\(colourBars?["id"] as? String ?? "")&ticks=10000000")
        let resume = try user.items(["resume"])
        #expect(resume?.first?["name"] as? String == "Colour Bars")
        #expect(resume?.first?["position_seconds"] as? Double == 1)
        let resumeText = try user.farcast(["resume"])
        #expect(resumeText.stdout.contains("at 0:01"))

        // image: written, then served from the cache, byte for byte the poster
        let poster = user.folder.path + "/poster.jpg"
        let image = try user.json(["image", "Test Pattern", "-o", poster]) as? [String: Any]
        #expect(image?["from_cache"] as? Bool == false)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: poster))
        #expect(bytes.starts(with: [0xFF, 0xD8, 0xFF]))
        #expect(bytes == (try Data(contentsOf: URL(fileURLWithPath: server.dataDirectory + "/media/movie1-poster.jpg"))))
        let again = try user.json(["image", "Test Pattern", "-o", poster]) as? [String: Any]
        #expect(again?["from_cache"] as? Bool == true)
        let noImage = try user.farcast(["image", "Season 1", "-o", poster])
        #expect(noImage.status == 1 && noImage.stderr.contains("has no Primary image"))
        // -o - is standard output (no file named "-"); an unwritable path is a usage error.
        let piped = user.folder.path + "/piped.jpg"
        let toStdout = try run("/bin/sh", ["-c", "cd \"$2\" && exec \"$0\" jellyfin image 'Test Pattern' -o - > \"$1\"", try farcastBinary(), piped, user.folder.path],
                               environment: user.environment, timeout: 60)
        #expect(toStdout.status == 0 && toStdout.stderr.contains("bytes to standard output"), "stderr: \(toStdout.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: piped)) == bytes)
        #expect(!FileManager.default.fileExists(atPath: user.folder.path + "/-"))
        let unwritable = try user.farcast(["image", "Test Pattern", "-o", "/nonexistent/x.jpg"])
        #expect(unwritable.status == 2 && unwritable.stderr.contains("the folder /nonexistent does not exist"), "status \(unwritable.status): \(unwritable.stderr)")

        // logout: the server revokes the token, the user is forgotten
        let tokenBefore = try tokenInState(user)
        let logout = try user.json(["logout"]) as? [String: Any]
        #expect(logout?["server_notified"] as? Bool == true)
        let after = try server.get("/Users/Me", headers: ["Authorization": "MediaBrowser Client=\"x\", Device=\"y\", DeviceId=\"z\", Version=\"1\", Token=\"\(tokenBefore)\""])
        #expect(after.status == 401)
        let notSignedIn = try user.farcast(["libraries"])
        #expect(notSignedIn.status == 1)
        #expect(notSignedIn.stderr.contains("not signed in"))
    }

    private func tokenInState(_ user: User) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: user.folder.path + "/state/farcast/jellyfin/servers.json"))
        let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let servers = object?["servers"] as? [[String: Any]]
        return ((servers?.first?["users"] as? [[String: Any]])?.first?["token"] as? String) ?? ""
    }

    /// A saved host (docs/hosts.md) and a jellyfin:// URL go through the one host-address path:
    /// `login NAME`, `--server NAME` and `--server jellyfin://…` reach the server they name, and
    /// the host book records the connection.
    @Test func aSavedHostAndAJellyfinURLNameTheServer() throws {
        let server = try JellyfinStandInServer()
        let user = try User()
        let port = server.url.split(separator: ":").last.map(String.init) ?? ""
        let added = try user.command(["hosts", "add", "media", "jellyfin://127.0.0.1:\(port)"])
        #expect(added.status == 0, "hosts add: \(added.stderr)")

        let login = try user.farcast(["login", "media", "--user", "demo", "--password-file", try server.passwordFile(in: user.folder)], timeout: 20)
        #expect(login.status == 0, "login media: \(login.stderr)")
        #expect(login.stdout.contains("signed in to Farcast Stand-in as demo"), "stdout: \(login.stdout)")
        let servers = try user.items(["servers"])
        #expect(servers?.first?["url"] as? String == server.url, "remembered by the server's own URL")

        for name in ["media", "jellyfin://127.0.0.1:\(port)", server.url] {
            let libraries = try user.farcast(["libraries", "--server", name])
            #expect(libraries.status == 0 && libraries.stdout.contains("Movies"), "--server \(name): \(libraries.stderr)")
        }
        let unknown = try user.farcast(["libraries", "--server", "jellyfin://127.0.0.1:1"])
        #expect(unknown.status == 2 && unknown.stderr.contains("no remembered server matches"), "stderr: \(unknown.stderr)")

        // The jellyfin:// scheme is taken by login too, and a name saved for VNC is a usage error.
        let byURL = try user.farcast(["login", "jellyfin://127.0.0.1:\(port)", "--user", "demo", "--password-file", try server.passwordFile(in: user.folder)], timeout: 20)
        #expect(byURL.status == 0, "login jellyfin://: \(byURL.stderr)")
        #expect(try user.command(["hosts", "add", "desk", "vnc://127.0.0.1:5901"]).status == 0)
        let wrongKind = try user.farcast(["login", "desk", "--user", "demo"], timeout: 20)
        #expect(wrongKind.status == 2 && wrongKind.stderr.contains("is a vnc host, not jellyfin"), "stderr: \(wrongKind.stderr)")

        let shown = try user.command(["hosts", "show", "media", "--json"])
        let record = try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any]
        #expect(record?["last_connected"] is String, "the book records the login: \(shown.stdout)")
    }

    @Test func quickConnectSignsInOnceTheCodeIsApproved() throws {
        let server = try JellyfinStandInServer()
        let user = try User()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try farcastBinary())
        process.arguments = ["jellyfin", "login", server.url, "--quick-connect", "--poll-interval", "0.2", "--timeout", "5"]
        process.environment = user.environment
        let err = Pipe(), out = Pipe()
        process.standardError = err
        process.standardOutput = out
        try process.run()
        // Read stderr until the code shows.
        var seen = ""
        let deadline = Date().addingTimeInterval(20)
        var code: String?
        while code == nil && Date() < deadline {
            let chunk = err.fileHandleForReading.availableData
            if chunk.isEmpty { usleep(50_000); continue }
            seen += String(decoding: chunk, as: UTF8.self)
            if let range = seen.range(of: #"Quick Connect code: (\d{6})"#, options: .regularExpression) {
                code = String(seen[range].suffix(6))
            }
        }
        guard let code else {
            process.terminate()
            Issue.record("no Quick Connect code shown: \(seen)")
            return
        }
        usleep(500_000)
        #expect(process.isRunning, "still waiting for approval")
        try server.hook("/StandIn/QuickConnect/Approve?code=\(code)")
        let finish = Date().addingTimeInterval(20)
        while process.isRunning && Date() < finish { usleep(50_000) }
        #expect(!process.isRunning)
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(seen)\(String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))")
        #expect(String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).contains("as demo"))
        let libraries = try user.items(["libraries"])
        #expect(libraries?.count == 3)
    }

    @Test func anUnapprovedQuickConnectCodeTimesOut() throws {
        let server = try JellyfinStandInServer()
        let user = try User()
        let result = try user.farcast(["login", server.url, "--quick-connect", "--poll-interval", "0.2", "--timeout", "0.2"], timeout: 30)
        #expect(result.status == 1)
        #expect(result.stderr.contains("was not approved in time"))
        #expect(result.stderr.hasSuffix("\n") && result.stderr.split(separator: "\n").last?.hasPrefix("farcast: ") == true)
    }

    @Test func aTokenRevokedMidSessionIsReportedAsSignedOutByTheServer() throws {
        let server = try JellyfinStandInServer()
        let user = try User()
        try user.login(server)
        #expect(try user.farcast(["libraries"]).status == 0)
        try server.hook("/StandIn/Revoke?user=demo")
        let result = try user.farcast(["ls", "Movies"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("signed out by the server"), "\(result.stderr)")
        #expect(result.stderr.contains("farcast jellyfin login"))
        #expect(result.stderr.split(separator: "\n").count == 1)
    }

    @Test func wrongPasswordAndUsageErrors() throws {
        let server = try JellyfinStandInServer()
        let user = try User()
        let wrong = user.folder.path + "/wrong"
        try "not-the-password\n".write(toFile: wrong, atomically: true, encoding: .utf8)
        chmod(wrong, 0o600)
        let refused = try user.farcast(["login", server.url, "--user", "demo", "--password-file", wrong])
        #expect(refused.status == 1)
        #expect(refused.stderr == "farcast: the server rejected the user name or password for 'demo'\n")
        // Usage errors fail before any network activity: a bad address exits 2; a bad flag value
        // exits 2, the usage code of every farcast command (docs/cli.md).
        #expect(try user.farcast(["login", "ftp://host"]).status == 2)
        let badType = try user.farcast(["ls", "--type", "spaceship"])
        #expect(badType.status == 2 && badType.stderr.contains("not an item type"))
        let badState = try user.farcast(["mark", "x", "loved"])
        #expect(badState.status == 2 && badState.stderr.contains("STATE must be"))
        // Nothing listens here: a one-line failure with the OS reason.
        let port = SendspinServer.reservePort()
        let unreachable = try user.farcast(["login", "http://127.0.0.1:\(port)", "--user", "demo", "--password-file", wrong])
        #expect(unreachable.status == 1)
        #expect(unreachable.stderr.contains("cannot reach http://127.0.0.1:\(port)"), "\(unreachable.stderr)")
        #expect(unreachable.stderr.lowercased().contains("refused"), "\(unreachable.stderr)")
    }

    /// Failures to connect come at once and in words, as VNC's do: a refused port and an unknown
    /// name (10 s of retries before), and a server that is not HTTP named by its greeting
    /// ("invalid constant string" before).
    @Test func connectionFailuresAreQuickAndInWords() throws {
        let user = try User()
        let password = user.folder.path + "/pw"
        try "x\n".write(toFile: password, atomically: true, encoding: .utf8)
        chmod(password, 0o600)
        // The resolver asks 127.0.0.1, where nothing listens: a name lookup that fails at once
        // and sends nothing beyond loopback (farcast runs in a mount namespace that sees this file
        // as /etc/resolv.conf).
        let resolvConf = user.folder.path + "/resolv.conf"
        try "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n".write(toFile: resolvConf, atomically: true, encoding: .utf8)
        func login(_ url: String) throws -> (result: ProcessResult, seconds: Double) {
            let start = Date()
            let result = try run("/usr/bin/unshare", ["-m", "/bin/sh", "-c", "mount --bind \"$0\" /etc/resolv.conf && exec \"$@\"", resolvConf,
                                                      try farcastBinary(), "jellyfin", "login", url, "--user", "demo", "--password-file", password],
                                 environment: user.environment, timeout: 30)
            return (result, Date().timeIntervalSince(start))
        }
        let closed = try RefusingTCPPort()
        // Which port is which, for a failure's log (one of these calls once hung 30 s in CI).
        print("connectionFailuresAreQuickAndInWords: the refusing port is \(closed.port)")
        let refused = try login("http://127.0.0.1:\(closed.port)")
        #expect(refused.result.status == 1 && refused.result.stderr.contains("connection refused"), "\(refused.result.stderr)")
        #expect(refused.seconds < 3, "refused after \(refused.seconds) s")
        let unknown = try login("http://no-such-host.invalid:8096")
        #expect(unknown.result.status == 1 && unknown.result.stderr.contains("cannot resolve the host name no-such-host.invalid"), "\(unknown.result.stderr)")
        #expect(!unknown.result.stderr.contains("SocketAddressError"), "\(unknown.result.stderr)")
        #expect(unknown.seconds < 5, "unknown name after \(unknown.seconds) s")
        let ssh = try HostileServer(mode: "ssh")
        print("connectionFailuresAreQuickAndInWords: the SSH greeter is on \(ssh.port)")
        let notHTTP = try login("http://127.0.0.1:\(ssh.port)")
        #expect(notHTTP.result.status == 1 && notHTTP.result.stderr.contains("that is not an HTTP server; it is an SSH server (it greeted with \"SSH-"), "\(notHTTP.result.stderr)")
        #expect(notHTTP.result.stderr.split(separator: "\n").count == 1, "\(notHTTP.result.stderr)")
        let vnc = try HostileServer(mode: "rfb-banner-silent")
        print("connectionFailuresAreQuickAndInWords: the RFB greeter is on \(vnc.port)")
        let vncAnswer = try login("http://127.0.0.1:\(vnc.port)")
        #expect(vncAnswer.result.stderr.contains("it is a VNC server"), "\(vncAnswer.result.stderr)")
        #expect(vncAnswer.seconds < 5, "the VNC server named after \(vncAnswer.seconds) s")
        // The banner the HTTP client lost (it came before the request and was dropped: CI saw the
        // GET wait 30 s): the greeting read beside the GET names the server at once.
        let lost = try HostileServer(mode: "rfb-banner-unasked")
        let lostAnswer = try login("http://127.0.0.1:\(lost.port)")
        #expect(lostAnswer.result.status == 1 && lostAnswer.result.stderr.contains("it is a VNC server"), "\(lostAnswer.result.stderr)")
        #expect(lostAnswer.seconds < 5, "the VNC server named after \(lostAnswer.seconds) s")
    }

    @Test func aStartingServerSaysSoAndARedirectedOneIsFollowed() throws {
        let starting = try JellyfinStandInServer(extra: ["--starting-seconds", "30"])
        let user = try User()
        let busy = try user.farcast(["login", starting.url, "--user", "demo", "--password-file", try starting.passwordFile(in: user.folder)])
        #expect(busy.status == 1)
        #expect(busy.stderr.contains("is starting up or busy (503"), "\(busy.stderr)")
        #expect(busy.stderr.contains("try again in"))

        let behindProxy = try JellyfinStandInServer(extra: ["--base-path", "/jellyfin"])
        let result = try user.farcast(["login", "127.0.0.1:\(behindProxy.port)", "--user", "demo", "--password-file", try behindProxy.passwordFile(in: user.folder), "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        #expect(object?["url"] as? String == "http://127.0.0.1:\(behindProxy.port)/jellyfin")
        let libraries = try user.items(["libraries"])
        #expect(libraries?.count == 3)
    }

    @Test func eventsPrintsLiveSessionMessages() throws {
        let server = try JellyfinStandInServer(keepAlive: 2)
        let user = try User()
        try user.login(server)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try farcastBinary())
        process.arguments = ["jellyfin", "events", "--json", "--count", "3", "--no-sessions", "--duration", "40"]
        process.environment = user.environment
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Wait for the socket, then push: a Play command, a user-data change (by marking), a general command.
        var sockets = "0"
        let deadline = Date().addingTimeInterval(20)
        while sockets == "0" && Date() < deadline {
            usleep(100_000)
            sockets = try server.get("/StandIn/Sockets").body
        }
        #expect(sockets == "1")
        try server.hook("/StandIn/Send", body: #"{"MessageType":"Play","MessageId":"m1","Data":{"ItemIds":["abc"],"PlayCommand":"PlayNow","StartPositionTicks":0}}"#)
        #expect(try user.farcast(["mark", "Dead Air", "favourite"]).status == 0)
        try server.hook("/StandIn/Send", body: #"{"MessageType":"GeneralCommand","MessageId":"m2","Data":{"Name":"DisplayMessage","Arguments":{"Header":"Hi","Text":"from the test"}}}"#)
        let finish = Date().addingTimeInterval(20)
        while process.isRunning && Date() < finish { usleep(50_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        let stdout = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus == 0, "\(String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))")
        let events = try jsonItems(stdout)
        let messages = events.filter { $0["event"] as? String == "message" }
        #expect(events.first?["event"] as? String == "connected")
        #expect(messages.compactMap { $0["message_type"] as? String } == ["Play", "UserDataChanged", "GeneralCommand"])
        #expect((messages.last?["detail"] as? String)?.contains("Text=from the test") == true)
        #expect(!stdout.contains(try tokenInState(user)), "the token never appears in output")
    }

    /// The periodic Sessions message (every 1.5 s) is asked for only with --sessions: by default
    /// `events` prints what happens, not a heartbeat.
    @Test func eventsLeaveTheSessionsHeartbeatOutUnlessAsked() throws {
        let server = try JellyfinStandInServer()
        let user = try User()
        try user.login(server)
        func messageTypes(_ arguments: [String]) throws -> [String] {
            let result = try user.farcast(["events", "--json", "--duration", "4"] + arguments)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            let events = try jsonItems(result.stdout)
            #expect(events.first?["event"] as? String == "connected", "\(arguments): \(result.stdout)")
            return events.compactMap { $0["message_type"] as? String }
        }
        #expect(!(try messageTypes([])).contains("Sessions"))
        #expect(!(try messageTypes(["--no-sessions"])).contains("Sessions"))
        #expect(try messageTypes(["--sessions"]).contains("Sessions"))
    }

    @Test func eventsStopsOnSIGTERMAndExitsZero() throws {
        let server = try JellyfinStandInServer()
        let user = try User()
        try user.login(server)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try farcastBinary())
        process.arguments = ["jellyfin", "events"]
        process.environment = user.environment
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        var sockets = "0"
        let deadline = Date().addingTimeInterval(20)
        while sockets == "0" && Date() < deadline {
            usleep(100_000)
            sockets = try server.get("/StandIn/Sockets").body
        }
        let stopped = Date()
        kill(process.processIdentifier, SIGTERM)
        while process.isRunning && Date().timeIntervalSince(stopped) < 5 { usleep(20_000) }
        #expect(!process.isRunning)
        #expect(Date().timeIntervalSince(stopped) < 1.5)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).contains("connected"))
    }
}
