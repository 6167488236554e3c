import FarcastSupport
import Foundation
import RFB
import Testing

/// QEMU's own VNC server (qemu-system-x86 7.2, a PC with no disk: SeaBIOS says it found nothing
/// to boot), compared with QEMU's own picture of its screen (`screendump` on the monitor).
@Suite(.tags(.groupA), .serialized, .timeLimit(.minutes(4)))
struct QEMUServerTests {
    /// Every encoding QEMU serves decodes to exactly QEMU's screendump. The text cursor blinks,
    /// so the two are compared until one moment when they agree (within 15 s).
    @Test func everyEncodingQEMUServesMatchesItsScreendump() async throws {
        let folder = try TemporaryFolder()
        let server = try QEMUVNCServer(folder: folder, running: true)
        for name in ["raw", "hextile", "zlib", "tight", "zrle"] {
            let encoding = try #require(RFBEncoding(name: name))
            var options = VNCClient.Options()
            options.configuration.encodings = [encoding]
            let client = try await VNCClient.connect(to: server.endpoint, credentials: { _ in throw RFBError.credentialsRequired("none") },
                                                     options: options)
            try await client.waitForFirstFrame(timeout: .seconds(20))
            var last = ""
            var matched = false
            let deadline = Date().addingTimeInterval(15)
            while !matched && Date() < deadline {
                let dump = try server.screendump()
                let framebuffer = await client.framebuffer
                if framebuffer.width != dump.width || framebuffer.height != dump.height {
                    last = "framebuffer \(framebuffer.width)x\(framebuffer.height), screendump \(dump.width)x\(dump.height)"
                } else {
                    let differing = zip(framebuffer.pixels, dump.pixels).reduce(0) { $0 + (($1.0 & 0xFFFFFF) != $1.1 ? 1 : 0) }
                    last = "\(differing) pixels differ"
                    matched = differing == 0
                }
                if !matched { try await Task.sleep(for: .milliseconds(150)) }
            }
            let used = await client.rectanglesByEncoding
            await client.close()
            #expect(matched, "\(name): \(last)")
            #expect(used[encoding, default: 0] > 0, "QEMU sent \(used) when asked for \(name)")
        }
    }

    /// A guest's sound over QEMU audio (pseudo-encoding −259): `watch --audio` writes the beeping
    /// guest's tone to a WAV file and plays it on an ALSA device (ALSA's file plugin records
    /// what reaches the device). Both carry a 1 kHz tone. (`view --audio`: VNCViewerWindowTests.)
    @Test func aGuestsSoundReachesAWAVFileAndAnALSADevice() throws {
        let folder = try TemporaryFolder()
        let server = try QEMUVNCServer.beeping(in: folder)
        let device = try ALSACaptureDevice(in: folder)
        func watch(_ destination: String) throws -> ProcessResult {
            try run(try farcastBinary(), ["vnc", "watch", "127.0.0.1::\(server.port)", "--duration", "3", "--audio", destination, "--json"],
                    environment: ["XDG_STATE_HOME": folder.path + "/state", "HOME": device.home, "PATH": "/usr/bin:/bin"], timeout: 60)
        }

        let wav = folder.path + "/guest.wav"
        let toFile = try watch(wav)
        #expect(toFile.status == 0, "stderr: \(toFile.stderr)")
        #expect(toFile.stdout.contains("\"audio_seconds\""), "stdout: \(toFile.stdout)")
        let written = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: wav))) ?? Data())
        let fileTone = LeftChannelTone(written, skipping: 44)
        #expect(fileTone.seconds > 2 && abs(fileTone.hertz - 1000) < 20, "the WAV file: \(fileTone)")

        let toDevice = try watch("alsa:\(ALSACaptureDevice.name)")
        #expect(toDevice.status == 0, "stderr: \(toDevice.stderr)")
        let deviceTone = LeftChannelTone(device.captured, skipping: 0)
        #expect(deviceTone.seconds > 2 && abs(deviceTone.hertz - 1000) < 20, "what reached the ALSA device: \(deviceTone)")
    }

    /// A wrong password: QEMU's failure reason ends in a NUL byte; the message shows its words
    /// and no control bytes.
    @Test func aRefusedPasswordIsReportedCleanly() throws {
        let folder = try TemporaryFolder()
        let server = try QEMUVNCServer(folder: folder, vncOptions: ",password-secret=pw", objects: ["secret,id=pw,data=right123"])
        let wrong = folder.path + "/wrong.txt"
        try "wrong123\n".write(toFile: wrong, atomically: true, encoding: .utf8)
        chmod(wrong, 0o600)
        let result = try run(try farcastBinary(), ["vnc", "info", "127.0.0.1::\(server.port)", "--password-file", wrong],
                             environment: ["XDG_STATE_HOME": folder.path + "/state", "PATH": "/usr/bin:/bin"], timeout: 30)
        #expect(result.status == 1)
        #expect(result.stderr.contains("authentication failed") && result.stderr.contains("Authentication failed"), "stderr: \(result.stderr)")
        #expect(!result.stderr.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" }, "no control bytes: \(Array(result.stderr.utf8))")
    }
}
