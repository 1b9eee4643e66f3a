//! The array controller's command path: what it costs a controller to put a
//! command on a disk.
//!
//! Without this model an array is as fast as its disks: the controller's
//! processors, its back-end loop and its interrupt handling are taken as
//! infinitely fast. A real controller spends time on every disk command it
//! issues and completes (building the command, the Fibre Channel exchange,
//! the completion interrupt, checking the blocks that come back), and a
//! small controller in front of twenty short-stroked 15K disks can run out
//! of that time before the disks run out of theirs.
//!
//! The model is one server in front of all of an array's disks: every disk
//! command waits its turn, in the order the array issued it, and takes the
//! controller's fixed time per command before it reaches the drive's queue.
//! The time is per command, not per byte or per host I/O: when a layout ages
//! and one host read becomes two disk commands, the controller pays twice.
//!
//! The controllers are named in `controllers.toml`, embedded like the
//! drive catalog, each number with its source. No published figure gives
//! the time per command of the controllers the experiments name, so each
//! is calibrated once on the experiment `experiments.md` marks as its
//! calibration target, and then used unchanged everywhere.

use std::collections::{BTreeMap, VecDeque};

use serde::Deserialize;
use wafer_core::units::{Duration, Instant};
use wafer_devices::DeviceRequest;

/// The controller file built into the lab.
pub const CONTROLLERS_TOML: &str = include_str!("../controllers.toml");

/// Most time one disk command may cost a controller: a second, far beyond
/// any real controller, catches a figure given in the wrong unit.
const COMMAND_US_MAX: f64 = 1_000_000.0;

/// A named controller's parameters, as `controllers.toml` gives them.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct ControllerEntry {
    model: String,
    command_us: f64,
}

/// A controller an array runs behind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerSpec {
    /// Its name in `controllers.toml`.
    pub name: String,
    /// What it is modelled on.
    pub model: String,
    /// The controller's time per disk command.
    pub per_command: Duration,
}

/// The controllers of `controllers.toml`, by name.
#[derive(Clone, Debug)]
pub struct ControllerCatalog {
    controllers: BTreeMap<String, ControllerSpec>,
}

/// Why `controllers.toml` was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ControllerCatalogError {
    /// The text is not a catalog.
    #[error("controllers.toml: {0}")]
    Syntax(String),
    /// A controller's time per command is not a time a controller takes.
    #[error(
        "controllers.toml: controller `{name}`: command_us = {value}: expected more than 0 and at most {COMMAND_US_MAX}"
    )]
    CommandTime {
        /// The controller.
        name: String,
        /// The figure given.
        value: f64,
    },
}

impl ControllerCatalog {
    /// The catalog built into the lab.
    pub fn builtin() -> ControllerCatalog {
        ControllerCatalog::parse(CONTROLLERS_TOML).expect("the built-in controllers.toml is valid")
    }

    /// Parses a catalog: tables `[controller.NAME]` with `model` and
    /// `command_us`.
    pub fn parse(text: &str) -> Result<ControllerCatalog, ControllerCatalogError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            #[serde(default)]
            controller: BTreeMap<String, ControllerEntry>,
        }
        let file: File =
            toml::from_str(text).map_err(|e| ControllerCatalogError::Syntax(e.to_string()))?;
        let controllers = file
            .controller
            .into_iter()
            .map(|(name, entry)| {
                let spec = spec_of(&name, entry)?;
                Ok((name, spec))
            })
            .collect::<Result<_, ControllerCatalogError>>()?;
        Ok(ControllerCatalog { controllers })
    }

    /// The controller called `name`.
    pub fn get(&self, name: &str) -> Option<&ControllerSpec> {
        self.controllers.get(name)
    }

    /// The names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.controllers.keys().map(String::as_str)
    }
}

fn spec_of(name: &str, entry: ControllerEntry) -> Result<ControllerSpec, ControllerCatalogError> {
    let value = entry.command_us;
    if !(value > 0.0 && value <= COMMAND_US_MAX) {
        return Err(ControllerCatalogError::CommandTime {
            name: name.to_string(),
            value,
        });
    }
    Ok(ControllerSpec {
        name: name.to_string(),
        model: entry.model,
        per_command: Duration((value * 1000.0).round() as u64),
    })
}

/// A disk command the controller has taken but not yet handed to its disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldCommand {
    /// When it reaches the disk.
    pub release_at: Instant,
    /// The disk, by its index in the array.
    pub disk: usize,
    /// The command.
    pub request: DeviceRequest,
}

/// One controller at work: disk commands in the order the array issued them,
/// each released to its disk when the controller has spent its time on it.
#[derive(Clone, Debug)]
pub struct Controller {
    per_command: Duration,
    /// When the controller finishes the last command it has taken.
    free_at: Instant,
    held: VecDeque<HeldCommand>,
    busy_ns: u64,
    commands: u64,
}

impl Controller {
    /// An idle controller that spends `per_command` on each disk command.
    pub fn new(per_command: Duration) -> Controller {
        assert!(per_command.0 > 0, "a controller command takes time");
        Controller {
            per_command,
            free_at: Instant(0),
            held: VecDeque::new(),
            busy_ns: 0,
            commands: 0,
        }
    }

    /// Takes a command for `disk` at `now`; it reaches the disk once the
    /// controller has worked through the commands before it and this one.
    pub fn take(&mut self, now: Instant, disk: usize, request: DeviceRequest) {
        let start = self.free_at.max(now);
        let release_at = Instant(start.0 + self.per_command.0);
        debug_assert!(
            self.held
                .back()
                .is_none_or(|last| last.release_at <= release_at)
        );
        self.free_at = release_at;
        self.busy_ns += self.per_command.0;
        self.commands += 1;
        self.held.push_back(HeldCommand {
            release_at,
            disk,
            request,
        });
    }

    /// When the next held command reaches its disk.
    pub fn next_release(&self) -> Option<Instant> {
        self.held.front().map(|held| held.release_at)
    }

    /// The next command due at or before `now`, in issue order.
    pub fn release(&mut self, now: Instant) -> Option<HeldCommand> {
        match self.held.front() {
            Some(held) if held.release_at <= now => self.held.pop_front(),
            _ => None,
        }
    }

    /// Time the controller has been busy up to `now`: all the commands it
    /// has finished, and the part of the current one it has worked.
    pub fn busy(&self, now: Instant) -> Duration {
        let ahead = self.free_at.0.saturating_sub(now.0);
        Duration(self.busy_ns - ahead)
    }

    /// Commands taken so far.
    pub fn commands(&self) -> u64 {
        self.commands
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wafer_devices::Op;

    fn read(id: u64) -> DeviceRequest {
        DeviceRequest {
            id,
            op: Op::Read,
            block: id,
            blocks: 1,
        }
    }

    #[test]
    fn commands_leave_in_issue_order_one_command_time_apart() {
        let mut controller = Controller::new(Duration(100));
        controller.take(Instant(1_000), 0, read(1));
        controller.take(Instant(1_000), 3, read(2));
        controller.take(Instant(1_050), 1, read(3));
        assert_eq!(controller.next_release(), Some(Instant(1_100)));
        assert_eq!(controller.release(Instant(1_099)), None);
        let first = controller.release(Instant(1_100)).expect("due");
        assert_eq!((first.request.id, first.disk), (1, 0));
        assert_eq!(controller.release(Instant(1_100)), None);
        assert_eq!(controller.next_release(), Some(Instant(1_200)));
        let rest: Vec<u64> = std::iter::from_fn(|| controller.release(Instant(5_000)))
            .map(|held| held.request.id)
            .collect();
        assert_eq!(rest, vec![2, 3]);
        assert_eq!(controller.commands(), 3);
    }

    #[test]
    fn an_idle_controller_starts_a_command_when_it_arrives() {
        let mut controller = Controller::new(Duration(100));
        controller.take(Instant(0), 0, read(1));
        controller.take(Instant(10_000), 0, read(2));
        assert_eq!(
            controller.release(Instant(100)).map(|h| h.request.id),
            Some(1)
        );
        assert_eq!(controller.next_release(), Some(Instant(10_100)));
        assert_eq!(controller.busy(Instant(10_050)), Duration(150));
        assert_eq!(controller.busy(Instant(20_000)), Duration(200));
    }

    #[test]
    fn the_catalog_refuses_a_command_time_no_controller_takes() {
        let zero = "[controller.x]\nmodel = \"x\"\ncommand_us = 0\n";
        assert!(matches!(
            ControllerCatalog::parse(zero),
            Err(ControllerCatalogError::CommandTime { .. })
        ));
        let unknown = "[controller.x]\nmodel = \"x\"\ncommand_us = 5\nmhz = 2200\n";
        assert!(matches!(
            ControllerCatalog::parse(unknown),
            Err(ControllerCatalogError::Syntax(_))
        ));
    }

    #[test]
    fn the_builtin_catalog_names_the_experiments_controllers() {
        let catalog = ControllerCatalog::builtin();
        for name in ["fas2050", "eva4400"] {
            let spec = catalog.get(name).expect("in controllers.toml");
            assert!(spec.per_command > Duration(0), "{name}");
        }
    }
}
