/// A change for the worse the simulator plants so an alert has something to
/// find (`onramp simulate --regress yoked:2.4.0:otp_verified:8`): devices on
/// `version` of `app` continue past `step` `points` percentage points less
/// often. A version the app does not have yet is released as its newest,
/// with the largest share of devices; `*` is every version. With `days`
/// (`yoked:*:otp_verified:8:7`) only devices starting in the last that many
/// days are affected: a bad week rather than a bad release. Negative points
/// plant an improvement. Steps are the names the app sends: the event or
/// screen name, or for the `forma` flow the `step` property.
public struct PlantedRegression: Sendable, Hashable {
    public var app: String
    public var version: String
    public var step: String
    public var points: Double
    /// Only devices starting within this many days of the end of the history; nil: all.
    public var days: Int?
    /// A broken release rather than a worse one (`onramp simulate --break
    /// yoked:2.4.0:otp_verified`): devices on the version do everything as
    /// before but never send the event or screen named `step`.
    public var stopsSending = false

    public init(app: String, version: String, step: String, points: Double, days: Int? = nil) {
        self.app = app
        self.version = version
        self.step = step
        self.points = points
        self.days = days
    }

    /// Parses `app:version:event`, a broken release; nil with the reason when it is not one.
    public static func parseBreak(_ text: String) -> Result<PlantedRegression, SimulationError> {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty, parts[1] != "*", !parts[2].isEmpty else {
            return .failure(SimulationError("--break must be app:version:event, e.g. yoked:2.4.0:otp_verified (got '\(text)')"))
        }
        if let unknown = unknownApp(parts[0], option: "--break") { return .failure(unknown) }
        var plant = PlantedRegression(app: parts[0], version: parts[1], step: parts[2], points: 0)
        plant.stopsSending = true
        return .success(plant)
    }

    /// Parses `app:version:step:points`; nil with the reason when it is not one.
    public static func parse(_ text: String) -> Result<PlantedRegression, SimulationError> {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 4 || parts.count == 5, !parts[0].isEmpty, !parts[1].isEmpty, !parts[2].isEmpty else {
            return .failure(SimulationError(
                "--regress must be app:version:step:points[:days], e.g. yoked:2.4.0:otp_verified:8 or yoked:*:otp_verified:8:7 (got '\(text)')"))
        }
        var days: Int?
        if parts.count == 5 {
            guard let value = Int(parts[4]), value >= 1 else {
                return .failure(SimulationError("--regress: days must be a whole number, at least 1 (got '\(parts[4])')"))
            }
            days = value
        }
        if let unknown = unknownApp(parts[0], option: "--regress") { return .failure(unknown) }
        guard let points = Double(parts[3]), points.isFinite, abs(points) <= 100 else {
            return .failure(SimulationError("--regress: points must be a number from -100 to 100 (got '\(parts[3])')"))
        }
        return .success(PlantedRegression(app: parts[0], version: parts[1], step: parts[2], points: points, days: days))
    }

    /// The error for an app the simulator does not simulate, naming `option`; nil for one it does.
    private static func unknownApp(_ app: String, option: String) -> SimulationError? {
        JourneyModel.apps.contains(app)
            ? nil : SimulationError("\(option): unknown app '\(app)' (simulated: \(JourneyModel.apps.joined(separator: ", ")))")
    }
}
