import Foundation
import Testing

/// The stand-in is ours, so it is checked from two sides that are not: schemathesis runs the
/// filtered 10.11 spec (enums intact) against it and validates every answer against the spec's
/// schemas, and jellyfin-apiclient-python (written against real servers, and browsing through
/// the legacy routes real servers still answer) signs in, browses and searches it. Both are
/// pinned in .venv-jellyfin by scripts/setup. No real Jellyfin server can run on these machines.
@Suite(.tags(.groupC), .serialized, .timeLimit(.minutes(8)))
struct JellyfinStandInConformanceTests {
    static var venv: String { ProcessInfo.processInfo.environment["FARCAST_JELLYFIN_VENV"] ?? packageRoot.appendingPathComponent(".venv-jellyfin").path }

    static func tool(_ name: String) throws -> String {
        let path = venv + "/bin/" + name
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw MissingPeer(what: "\(name) in \(venv) (schemathesis==4.32.5, jellyfin-apiclient-python==1.20.2)")
        }
        return path
    }

    func token(_ server: JellyfinStandInServer) throws -> String {
        let result = try run(try requireExecutable("curl", package: "curl"), [
            "-sS", "-X", "POST", "http://127.0.0.1:\(server.port)/Users/AuthenticateByName",
            "-H", "Content-Type: application/json",
            "-H", #"Authorization: MediaBrowser Client="schemathesis", Device="conformance", DeviceId="schemathesis-1", Version="4.32.5""#,
            "--data-binary", #"{"Username":"demo","Pw":"\#(try server.password)"}"#,
        ])
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        guard let token = object?["AccessToken"] as? String else { throw PeerFailed(name: "sign-in for schemathesis", log: result.stdout + result.stderr) }
        return token
    }

    /// The first id among `/Items` of a kind (for schemathesis's parameters).
    func firstId(_ server: JellyfinStandInServer, token: String, query: String) throws -> String {
        let answer = try server.get("/Items?\(query)&ApiKey=\(token)")
        let object = try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any]
        guard let id = (object?["Items"] as? [[String: Any]])?.first?["Id"] as? String else {
            throw PeerFailed(name: "stand-in listing \(query)", log: answer.body)
        }
        return id
    }

    @Test func schemathesisFindsTheStandInTrueToTheSpec() throws {
        // Data of its own: the generated playback reports and marks move the demo user's resume
        // points and played states, which other suites in the process read.
        let server = try JellyfinStandInServer(privateData: true)
        let token = try token(server)
        let spec = packageRoot.appendingPathComponent("scripts/gen/jellyfin/jellyfin-openapi.filtered.json").path
        let folder = try TemporaryFolder()
        // Real ids, so generated requests reach the library instead of ending at 404; the rest of
        // every request is generated from the spec.
        let me = try JSONSerialization.jsonObject(with: Data(try server.get("/Users/Me?ApiKey=\(token)").body.utf8)) as? [String: Any]
        let userId = try #require(me?["Id"] as? String)
        let movie = try firstId(server, token: token, query: "recursive=true&includeItemTypes=Movie")
        let series = try firstId(server, token: token, query: "recursive=true&includeItemTypes=Series")
        let season = try firstId(server, token: token, query: "recursive=true&includeItemTypes=Season")
        let movies = try firstId(server, token: token, query: "sortBy=SortName")
        // Real servers answer a wrong user name or password with 401, which the 10.11 spec does not
        // list for AuthenticateUserByName (only 200 and 503); the stand-in answers as real servers
        // do, so that one check is off for that one operation (and for the Live TV timer
        // operations, below, for the same reason).
        try """
            [checks]
            enabled = false
            not_a_server_error.enabled = true
            status_code_conformance.enabled = true
            content_type_conformance.enabled = true
            response_schema_conformance.enabled = true
            response_headers_conformance.enabled = true

            [parameters]
            itemId = "\(movie)"
            seriesId = "\(series)"
            seasonId = "\(season)"
            parentId = "\(movies)"
            userId = "\(userId)"

            [[operations]]
            include-operation-id = "AuthenticateUserByName"
            checks.status_code_conformance.enabled = false

            # Real servers answer 404 (ResourceNotFoundException) for a timer id they do not
            # have and fail on a programme id they do not have, none of it in the spec; the
            # stand-in answers 404 for an unknown timer or programme and 400 for a timer whose
            # programme is unknown or over.
            [[operations]]
            include-operation-id = "CancelTimer"
            checks.status_code_conformance.enabled = false

            [[operations]]
            include-operation-id = "GetDefaultTimer"
            checks.status_code_conformance.enabled = false

            [[operations]]
            include-operation-id = "CreateTimer"
            checks.status_code_conformance.enabled = false
            """.write(toFile: folder.path + "/schemathesis.toml", atomically: true, encoding: .utf8)
        // Positive examples (what a client sends), every answer checked against the spec (the
        // checks are chosen in the file: a --checks flag would override the per-operation setting).
        // ReportSessionEnded would revoke the token under test; the header carries it.
        let result = try run(try Self.tool("schemathesis"), [
            "--config-file", folder.path + "/schemathesis.toml",
            "run", spec, "--url", "http://127.0.0.1:\(server.port)",
            "--header", #"Authorization: MediaBrowser Client="schemathesis", Device="conformance", DeviceId="schemathesis-1", Version="4.32.5", Token="\#(token)""#,
            "--mode", "positive", "--max-examples", "20", "--seed", "7", "--workers", "1",
            "--exclude-operation-id", "ReportSessionEnded",
            "--request-timeout", "20", "--no-shrink", "--suppress-health-check", "all",
        ], environment: ProcessInfo.processInfo.environment.merging(["NO_COLOR": "1", "SCHEMATHESIS_TELEMETRY": "false"]) { $1 }, timeout: 450)
        #expect(result.status == 0, "schemathesis:\n\(result.stdout.suffix(6000))\n\(result.stderr.suffix(2000))")
        // It really exercised the operations (not a run that tested nothing).
        let tested = result.stdout.range(of: #"Tested: (\d+)"#, options: .regularExpression).map { Int(result.stdout[$0].dropFirst(8)) ?? 0 } ?? 0
        #expect(tested >= 20, "schemathesis tested \(tested) operations:\n\(result.stdout.suffix(3000))")
        #expect(server.process.isRunning, "the stand-in survived: \(server.process.log.suffix(2000))")
    }

    @Test func jellyfinApiclientPythonSignsInBrowsesAndSearches() throws {
        let server = try JellyfinStandInServer()
        let script = packageRoot.appendingPathComponent("scripts/lib/jellyfin_apiclient_check.py").path
        let result = try run(try Self.tool("python"), [script, "check", server.url, "demo", try server.password], timeout: 120)
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        let seen = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        #expect(seen?["user"] as? String == "demo")
        #expect(seen?["views"] as? [String] == ["Movies", "Shows", "Music"])
        let children = seen?["children"] as? [String: [String]]
        #expect(children?["Movies"] == ["Colour Bars", "Mandelbrot Zoom", "Test Pattern"])
        #expect(children?["Shows"] == ["Signal Tests"])
        #expect(children?["Music"] == ["Test Tones"])
        #expect(seen?["search_signal_series"] as? [String] == ["Signal Tests"])
        #expect(seen?["movies"] as? [String] == ["Colour Bars", "Mandelbrot Zoom", "Test Pattern"])
        let detail = seen?["detail"] as? [String: Any]
        #expect(detail?["name"] as? String == "Colour Bars")
        #expect(detail?["streams"] as? [String] == ["Video", "Audio"])
        #expect((detail?["date_created"] as? String)?.range(of: #"\.\d{7}Z$"#, options: .regularExpression) != nil)
    }
}
