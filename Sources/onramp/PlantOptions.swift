import ArgumentParser
import Simulation

/// `--regress` and `--break`: what `onramp simulate` and `onramp demo` plant in the simulated traffic.
struct PlantOptions: ParsableArguments {
    @Option(name: .customLong("regress"), help: ArgumentHelp(
        "Plant a regression: app:version:step:points[:days] (repeatable), e.g. yoked:2.4.0:profile_created:8.",
        discussion: "Devices on that version (* for every version) continue past the step that many percentage points less often; a new version is released as the app's newest. With days, only devices starting in the last that many days: a bad week instead of a bad release."))
    var regressions: [String] = []

    @Option(name: .customLong("break"), help: ArgumentHelp(
        "Plant a broken release: app:version:event (repeatable), e.g. yoked:2.4.0:otp_verified.",
        discussion: "Devices on that version do everything as before but never send the event or screen; a new version is released as the app's newest."))
    var breaks: [String] = []

    func validate() throws { _ = try plants() }

    /// The regressions, then the broken releases; an error naming the option when one is malformed.
    func plants() throws -> [PlantedRegression] {
        var plants: [PlantedRegression] = []
        for (texts, parse) in [(regressions, PlantedRegression.parse), (breaks, PlantedRegression.parseBreak)] {
            for text in texts {
                switch parse(text) {
                case .success(let plant): plants.append(plant)
                case .failure(let error): throw ValidationError(error.description)
                }
            }
        }
        return plants
    }
}
