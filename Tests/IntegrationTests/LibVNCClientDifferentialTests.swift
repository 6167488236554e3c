import Crypto
import FarcastSupport
import Foundation
import RFB
import Testing

/// Differential test against libvncclient 0.9.14 (Debian's libvncserver), the C reference
/// client: the same recorded real-server streams must leave both with identical framebuffers.
/// The harness (scripts/lib/bench/libvncclient_replay.c) is the one `scripts/bench vnc` uses.
@Suite(.tags(.groupC), .serialized, .timeLimit(.minutes(3)))
struct LibVNCClientDifferentialTests {
    static func build(_ source: String, output: String, flags: [String]) throws -> String {
        let gcc = try requireExecutable("gcc", package: "gcc")
        let result = try run(gcc, ["-O2", "-o", output, packageRoot.appendingPathComponent(source).path] + flags, timeout: 120)
        guard result.status == 0 else { throw PeerFailed(name: "gcc \(source)", log: result.stderr) }
        return output
    }

    static func pkgConfig(_ package: String, debian: String) throws -> [String] {
        let result = try run(try requireExecutable("pkg-config", package: "pkg-config"), ["--cflags", "--libs", package])
        guard result.status == 0 else { throw MissingPeer(what: "\(package) (Debian package \(debian))") }
        return result.stdout.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
    }

    static func harness(in folder: TemporaryFolder) throws -> String {
        try build("scripts/lib/bench/libvncclient_replay.c", output: folder.path + "/libvncclient_replay",
                  flags: try pkgConfig("libvncclient", debian: "libvncserver-dev") + ["-lcrypto", "-lpthread"])
    }

    static func libvncclientHash(_ harness: String, capture: String) throws -> (sha256: String, pixels: Int) {
        let result = try run(harness, [capture], timeout: 120)
        guard result.status == 0 else { throw PeerFailed(name: "libvncclient_replay \(capture)", log: result.stderr) }
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as! [String: Any]
        return (object["sha256"] as! String, object["pixels"] as! Int)
    }

    static func ourHash(_ capture: RFBCapture) throws -> (sha256: String, pixels: Int) {
        let result = try RFBReplay.run(capture)
        #expect(result.error == nil, "\(String(describing: result.error))")
        return (hexString(SHA256.hash(data: result.framebuffer.rgbBytes())), result.pixels)
    }

    @Test func recordedFixturesDecodeIdentically() throws {
        let folder = try TemporaryFolder()
        let harness = try Self.harness(in: folder)
        let directory = packageRoot.appendingPathComponent("Tests/RFBTests/Fixtures/captures")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".rfb") }.sorted()
        #expect(names.count >= 8)
        for name in names {
            let path = directory.appendingPathComponent(name).path
            let ours = try Self.ourHash(try RFBCapture(bytes: Array(try Data(contentsOf: URL(fileURLWithPath: path)))))
            let theirs = try Self.libvncclientHash(harness, capture: path)
            #expect(ours.sha256 == theirs.sha256, "\(name): framebuffers differ")
            #expect(ours.pixels == theirs.pixels, "\(name): \(ours.pixels) vs \(theirs.pixels) pixels decoded")
        }
    }

    /// A fresh recording of moving content (text, photos as Tight JPEG, fills) from Xvnc.
    @Test(arguments: ["tight", "zrle", "hextile"])
    func aLiveRecordingDecodesIdentically(encoding: String) async throws {
        let folder = try TemporaryFolder()
        let harness = try Self.harness(in: folder)
        let workload = try Self.build("scripts/lib/bench/rfb_workload.c", output: folder.path + "/rfb_workload", flags: ["-lX11", "-lm"])
        let server = try XvncServer(geometry: "640x480", securityTypes: "None", passwords: nil)
        var configuration = RFBConnection.Configuration()
        configuration.encodings = [RFBEncoding(name: encoding)!]
        configuration.jpegQuality = encoding == "tight" ? 6 : nil
        configuration.continuousUpdates = false
        configuration.securityPreference = [.none]
        // Recorded as `farcast vnc record` does: a plain viewer's stream (no Extended Clipboard
        // or CursorWithAlpha, which libvncclient did not negotiate and would reject).
        configuration.viewOnly = true
        configuration.extendedClipboard = false
        configuration.alphaCursor = false
        let recorded = RecordedBytes()
        var options = VNCClient.Options()
        options.configuration = configuration
        options.inboundTap = { recorded.append($0) }
        let client = try await VNCClient.connect(to: server.endpoint, credentials: { _ in VNCCredentials(password: "") }, options: options)
        try await client.waitForFirstFrame()
        for kind in ["text", "photo", "fill", "mixed"] {
            let drawn = try run(workload, [kind, "0.6", "20"], environment: server.environment, timeout: 30)
            #expect(drawn.status == 0, "workload \(kind): \(drawn.stderr)")
        }
        try await Task.sleep(for: .milliseconds(300))
        let jpeg = await client.tightJPEGRectangles
        await client.close()
        let capture = try RFBCapture(metadata: .init(pixelFormat: .rgb888, encodings: RFBConnection(configuration: configuration).encodingList(),
                                                     server: "Xvnc"), stream: recorded.bytes).trimmedToLastCompleteMessage()
        let path = folder.path + "/live.rfb"
        try Data(try capture.serialized()).write(to: URL(fileURLWithPath: path))
        let ours = try Self.ourHash(capture)
        let theirs = try Self.libvncclientHash(harness, capture: path)
        #expect(ours.pixels > 640 * 480 * 2, "the workload produced only \(ours.pixels) pixels of updates")
        if encoding == "tight" { #expect(jpeg > 0, "no JPEG rectangles in the photo phase") }
        #expect(ours.sha256 == theirs.sha256, "\(encoding): framebuffers differ")
    }
}
