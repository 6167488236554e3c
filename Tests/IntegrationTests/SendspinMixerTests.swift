import Foundation
import Testing

/// `--mixer`: the server's volume and mute land on an ALSA mixer control instead of the samples.
/// There is no sound card here, so the control is PulseAudio's (alsa-plugins' `pulse` control
/// device in front of a private PulseAudio, `PulseAudioDAC`): its `Master` is the sink's volume and
/// mute, read back with `pactl` — the sound server's own view, not farcast's. The server is
/// aiosendspin 10.2.1 (scripts/lib/sendspin_volume_server.py, on its player-role API).
@Suite(.serialized, .timeLimit(.minutes(2)))
struct SendspinMixerTests {
    @Test func theServersVolumeAndMuteMoveTheMixerControl() throws {
        let pactl = try requireExecutable("pactl", package: "pulseaudio-utils")
        let folder = try TemporaryFolder()
        let dac = try PulseAudioDAC(folder: folder.path + "/pulse", seconds: 30)
        defer { dac.stop() }
        // farcast's ALSA configuration: ~/.asoundrc in a home of its own naming the control device.
        let home = folder.path + "/home"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        try "ctl.farcastmix { type pulse server \"unix:\(folder.path)/pulse/native\" }\n".write(toFile: home + "/.asoundrc", atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home
        environment["XDG_STATE_HOME"] = folder.path + "/state"

        // A control that is not there: a note, and the samples are scaled instead (the run goes
        // on to the connection, refused here: nothing listens on port 1).
        let missing = try BackgroundProcess(try farcastBinary(), ["sendspin", "play", "ws://127.0.0.1:1/sendspin", "--output", "null", "--duration", "1",
                                                                  "--mixer", "alsa:Nowhere@farcastmix"], environment: environment, logName: "farcast-mixer-missing")
        _ = missing.waitForExit(timeout: 20)
        #expect(missing.log.contains("has no control 'Nowhere'") && missing.log.contains("scaling the samples instead"), "\(missing.log)")

        func sink() -> (volume: Int?, muted: Bool?) {
            let env = ["PULSE_SERVER": "unix:\(folder.path)/pulse/native", "HOME": home, "PATH": "/usr/bin:/bin"]
            let volume = (try? run(pactl, ["get-sink-volume", "out"], environment: env, timeout: 10))?.stdout
            let mute = (try? run(pactl, ["get-sink-mute", "out"], environment: env, timeout: 10))?.stdout
            // "Volume: front-left: 26214 /  40% / -23.88 dB,   front-right: …"
            let percent = volume.flatMap { $0.split(separator: "/").dropFirst().first }.flatMap { Int($0.trimmingCharacters(in: .whitespaces).dropLast()) }
            return (percent, mute.map { $0.contains("yes") })
        }
        let before = sink()
        #expect(before.volume == 100 && before.muted == false, "the sink starts at 100 %, unmuted: \(before)")

        let port = SendspinServer.reservePort()
        let log = folder.path + "/steps"
        let server = try SendspinServer.script("sendspin_volume_server.py", port: port, ["--log", log, "--settle", "1.5", "--step", "1.5"],
                                               logName: "sendspin-volume-server")
        defer { server.stop() }
        let player = try BackgroundProcess(try farcastBinary(), ["sendspin", "play", "ws://127.0.0.1:\(port)/sendspin", "--output", "null", "--duration", "12",
                                                                 "--mixer", "alsa:Master@farcastmix"], environment: environment, logName: "farcast-mixer")
        defer { player.stop() }
        let logs = { "\(player.log)\n\(server.log.suffix(2000))" }
        // Each command, in order, as the sound server sees its sink.
        try waitUntil("volume 40 on the sink", timeout: 15) { sink().volume == 40 }
        try waitUntil("the sink muted", timeout: 5) { sink().muted == true }
        #expect(sink().volume == 40, "muting kept the volume")
        try waitUntil("the sink unmuted", timeout: 5) { sink().muted == false }
        try waitUntil("volume 70 on the sink", timeout: 5) { sink().volume == 70 }
        try waitUntil("the timeline's end", timeout: 5) { ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("done") }
        // The player reported what it applied: the server's own view after the last step.
        let steps = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(steps.contains("done 70 False"), "\(steps)\n\(logs())")
        #expect(player.log.contains("volume and mute on ALSA mixer 'Master' on farcastmix"), "\(logs())")
        #expect(!player.log.contains("scaling the samples instead"), "\(logs())")
    }
}
