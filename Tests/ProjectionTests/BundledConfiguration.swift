import Funnels

/// The six funnels the product ships, loaded once for every suite here.
let bundledConfiguration: FunnelConfiguration = {
    guard let c = try? FunnelConfiguration.default() else { fatalError("default configuration must load") }
    return c
}()
