import Foundation

extension QEMUVNCServer {
    /// A PC that boots a floppy whose boot sector sounds the PC speaker at 1193182 / 1193 ≈
    /// 1000 Hz forever, with its audio going to the VNC server (pseudo-encoding −259).
    static func beeping(in folder: TemporaryFolder) throws -> QEMUVNCServer {
        // mov al,0xB6; out 0x43,al; mov ax,1193; out 0x42,al; mov al,ah; out 0x42,al;
        // in al,0x61; or al,3; out 0x61,al; hlt; jmp $-1 — then the boot signature.
        let code: [UInt8] = [0xB0, 0xB6, 0xE6, 0x43, 0xB8, 0xA9, 0x04, 0xE6, 0x42, 0x88, 0xE0, 0xE6, 0x42, 0xE4, 0x61, 0x0C, 0x03,
                             0xE6, 0x61, 0xF4, 0xEB, 0xFD]
        var floppy = code + [UInt8](repeating: 0, count: 510 - code.count) + [0x55, 0xAA]
        floppy += [UInt8](repeating: 0, count: 1_474_560 - floppy.count)
        let image = folder.path + "/beep.img"
        try Data(floppy).write(to: URL(fileURLWithPath: image))
        return try QEMUVNCServer(folder: folder, running: true, vncOptions: ",audiodev=snd0", machine: "pc,pcspk-audiodev=snd0",
                                 extra: ["-audiodev", "none,id=snd0", "-drive", "file=\(image),format=raw,if=floppy"])
    }
}

/// An ALSA device named `farcasttest`, defined in the ~/.asoundrc of a private HOME: ALSA's
/// file plugin in front of the null device, so what a program plays on it lands in a raw file
/// (S16LE stereo at the rate played).
struct ALSACaptureDevice {
    static let name = "farcasttest"
    /// The HOME to give the program that plays.
    let home: String
    let file: String

    init(in folder: TemporaryFolder) throws {
        home = folder.path + "/home"
        file = folder.path + "/alsa.raw"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        try "pcm.\(Self.name) { type file slave.pcm \"null\" file \"\(file)\" format \"raw\" }\n"
            .write(toFile: home + "/.asoundrc", atomically: true, encoding: .utf8)
    }

    /// What reached the device so far.
    var captured: [UInt8] { [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: file))) ?? Data()) }
}

/// The left channel's frequency (from zero crossings) and length of 48 kHz S16LE stereo audio.
struct LeftChannelTone: CustomStringConvertible {
    let hertz: Double
    let seconds: Double

    init(_ bytes: [UInt8], skipping header: Int) {
        let frames = max(0, bytes.count - header) / 4
        var crossings = 0, previous: Int16 = 0
        for f in 0..<frames {
            let i = header + f * 4
            let left = Int16(bitPattern: UInt16(bytes[i]) | UInt16(bytes[i + 1]) << 8)
            if f > 0 && (left < 0) != (previous < 0) { crossings += 1 }
            previous = left
        }
        seconds = Double(frames) / 48000
        hertz = Double(crossings) / 2 / max(seconds, 1e-9)
    }

    var description: String { String(format: "%.1f Hz over %.2f s", hertz, seconds) }
}
