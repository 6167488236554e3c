/// Facts about this build of Farcast.
public enum FarcastInfo {
    /// Semantic version of the package and the `farcast` command.
    public static let version = "0.1.0"
}
