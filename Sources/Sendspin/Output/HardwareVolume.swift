/// Where the server's volume and mute go instead of scaling the samples: a mixer control
/// (`ALSAMixer` on Linux), or an app's system volume. `PlayerCore` keeps the samples at unity
/// gain while one works, and falls back to scaling them when it fails.
public protocol HardwareVolume: AnyObject, Sendable {
    /// What it is, for the log and the report ("ALSA mixer 'Master' on default").
    var description: String { get }
    /// Volume 0…100 on the same scale the server speaks; `muted` silences without losing it.
    func apply(volume: Int, muted: Bool) throws
}
