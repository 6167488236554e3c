/// Smooths (reading time, departure of the next frame) measurements into a departure clock: a
/// second-order loop (Adriaensen's DLL) whose phase is the next frame's departure and whose
/// frequency is the frame duration. Pure: the ALSA sink feeds it the device's delay reports,
/// tests feed it made-up ones.
struct DelayLockedLoop {
    private(set) var frameUs: Double
    private(set) var nextDepartureUs = 0.0
    private var locked = false
    private var firstMeasurementUs = 0.0
    private let nominalFrameUs: Double
    /// How often measurements come (s): once a device period — the period the device granted,
    /// which need not be the one asked for, so the loop's bandwidth stays what it says in hertz.
    private let intervalS: Double

    init(frameUs: Double = 1e6 / 48000, updateIntervalUs: Double = 10_000) {
        self.frameUs = frameUs
        nominalFrameUs = frameUs
        intervalS = updateIntervalUs / 1e6
    }

    /// Takes the measured departure of the next frame to be written, read at `atUs`.
    mutating func measure(departureUs measured: Double, atUs: Double) {
        guard locked else {
            nextDepartureUs = measured
            firstMeasurementUs = atUs
            locked = true
            return
        }
        let error = measured - nextDepartureUs
        // A jump no loop should follow smoothly (a stall, a device restarted under us): re-lock.
        if abs(error) > 5000 {
            nextDepartureUs = measured
            return
        }
        let bandwidthHz = atUs - firstMeasurementUs < 5_000_000 ? 1.0 : 0.5
        let omega = 2 * Double.pi * bandwidthHz * intervalS
        nextDepartureUs += 2.0.squareRoot() * omega * error
        // Frequency: the error accumulated over about one update interval of frames.
        frameUs += omega * omega * error / (intervalS * 1e6 / nominalFrameUs)
        frameUs = min(max(frameUs, nominalFrameUs * 0.995), nominalFrameUs * 1.005)
    }

    /// `frames` were written: the next frame leaves that much later.
    mutating func advance(frames: Int) { nextDepartureUs += Double(frames) * frameUs }

    /// After an underrun the queue restarted: keep the frame duration, take the phase afresh.
    mutating func resetPhase() {
        let keep = firstMeasurementUs
        locked = false
        firstMeasurementUs = keep
    }
}
