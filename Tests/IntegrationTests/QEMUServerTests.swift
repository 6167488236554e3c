import FarcastSupport
import Foundation
import RFB
import Testing

/// QEMU's own VNC server (qemu-system-x86 7.2, a PC with no disk: SeaBIOS says it found nothing
/// to boot), compared with QEMU's own picture of its screen (`screendump` on the monitor).
@Suite(.serialized, .timeLimit(.minutes(4)))
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

    /// A guest's sound over QEMU audio (pseudo-encoding −259): the PC boots a floppy whose boot
    /// sector sounds the PC speaker at 1193182 / 1193 ≈ 1000 Hz forever; `watch --audio` writes
    /// it to a WAV file and plays it on an ALSA device (ALSA's file plugin, defined in the
    /// ~/.asoundrc of a private HOME, records what reaches the device). Both carry a 1 kHz tone.
    @Test func aGuestsSoundReachesAWAVFileAndAnALSADevice() throws {
        let folder = try TemporaryFolder()
        // mov al,0xB6; out 0x43,al; mov ax,1193; out 0x42,al; mov al,ah; out 0x42,al;
        // in al,0x61; or al,3; out 0x61,al; hlt; jmp $-1 — then the boot signature.
        let code: [UInt8] = [0xB0, 0xB6, 0xE6, 0x43, 0xB8, 0xA9, 0x04, 0xE6, 0x42, 0x88, 0xE0, 0xE6, 0x42, 0xE4, 0x61, 0x0C, 0x03,
                             0xE6, 0x61, 0xF4, 0xEB, 0xFD]
        var floppy = code + [UInt8](repeating: 0, count: 510 - code.count) + [0x55, 0xAA]
        floppy += [UInt8](repeating: 0, count: 1_474_560 - floppy.count)
        let image = folder.path + "/beep.img"
        try Data(floppy).write(to: URL(fileURLWithPath: image))
        let server = try QEMUVNCServer(folder: folder, running: true, vncOptions: ",audiodev=snd0", machine: "pc,pcspk-audiodev=snd0",
                                       extra: ["-audiodev", "none,id=snd0", "-drive", "file=\(image),format=raw,if=floppy"])
        let home = folder.path + "/home"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let captured = folder.path + "/alsa.raw"
        try "pcm.farcasttest { type file slave.pcm \"null\" file \"\(captured)\" format \"raw\" }\n"
            .write(toFile: home + "/.asoundrc", atomically: true, encoding: .utf8)
        func watch(_ destination: String) throws -> ProcessResult {
            try run(try farcastBinary(), ["vnc", "watch", "127.0.0.1::\(server.port)", "--duration", "3", "--audio", destination, "--json"],
                    environment: ["XDG_STATE_HOME": folder.path + "/state", "HOME": home, "PATH": "/usr/bin:/bin"], timeout: 60)
        }
        /// The left channel's frequency from zero crossings, and its length in seconds.
        func tone(_ bytes: [UInt8], skipping header: Int) -> (hertz: Double, seconds: Double) {
            let frames = (bytes.count - header) / 4
            var crossings = 0, previous: Int16 = 0
            for f in 0..<frames {
                let i = header + f * 4
                let left = Int16(bitPattern: UInt16(bytes[i]) | UInt16(bytes[i + 1]) << 8)
                if f > 0 && (left < 0) != (previous < 0) { crossings += 1 }
                previous = left
            }
            let seconds = Double(frames) / 48000
            return (Double(crossings) / 2 / max(seconds, 1e-9), seconds)
        }

        let wav = folder.path + "/guest.wav"
        let toFile = try watch(wav)
        #expect(toFile.status == 0, "stderr: \(toFile.stderr)")
        #expect(toFile.stdout.contains("\"audio_seconds\""), "stdout: \(toFile.stdout)")
        let written = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: wav))) ?? Data())
        let fileTone = tone(written, skipping: 44)
        #expect(fileTone.seconds > 2 && abs(fileTone.hertz - 1000) < 20, "the WAV file: \(fileTone)")

        let toDevice = try watch("alsa:farcasttest")
        #expect(toDevice.status == 0, "stderr: \(toDevice.stderr)")
        let played = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: captured))) ?? Data())
        let deviceTone = tone(played, skipping: 0)
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
