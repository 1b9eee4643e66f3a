//! SCSI status and sense data: how a command that fails says why.
//!
//! A failed command ends with status CHECK CONDITION and sense data, here
//! always in fixed format (response code 0x70): a sense key for the class
//! of failure and an additional sense code and qualifier (ASC, ASCQ) for
//! the particular one. Every failure this target reports is one of the
//! [`Sense`] constants; a miscompare also says where, in the INFORMATION
//! field.

/// A SCSI status byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status(pub u8);

impl Status {
    /// The command succeeded.
    pub const GOOD: Status = Status(0x00);
    /// The command failed; sense data says why.
    pub const CHECK_CONDITION: Status = Status(0x02);
    /// The target cannot take the command now; try again.
    pub const BUSY: Status = Status(0x08);
    /// The command conflicts with a persistent reservation held by
    /// another I_T nexus.
    pub const RESERVATION_CONFLICT: Status = Status(0x18);
    /// The task set is full; try again.
    pub const TASK_SET_FULL: Status = Status(0x28);
}

/// A sense key with its additional sense code and qualifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sense {
    /// The class of failure.
    pub key: u8,
    /// Additional sense code.
    pub asc: u8,
    /// Additional sense code qualifier.
    pub ascq: u8,
    /// The INFORMATION field, when it is valid (a miscompare's offset).
    pub information: Option<u32>,
}

impl Sense {
    /// ILLEGAL REQUEST, INVALID COMMAND OPERATION CODE.
    pub const INVALID_OPCODE: Sense = Sense::new(0x05, 0x20, 0x00);
    /// ILLEGAL REQUEST, INVALID FIELD IN CDB.
    pub const INVALID_FIELD_IN_CDB: Sense = Sense::new(0x05, 0x24, 0x00);
    /// ILLEGAL REQUEST, INVALID FIELD IN PARAMETER LIST.
    pub const INVALID_FIELD_IN_PARAMETER_LIST: Sense = Sense::new(0x05, 0x26, 0x00);
    /// ILLEGAL REQUEST, PARAMETER LIST LENGTH ERROR.
    pub const PARAMETER_LIST_LENGTH_ERROR: Sense = Sense::new(0x05, 0x1a, 0x00);
    /// ILLEGAL REQUEST, LOGICAL BLOCK ADDRESS OUT OF RANGE.
    pub const LBA_OUT_OF_RANGE: Sense = Sense::new(0x05, 0x21, 0x00);
    /// ILLEGAL REQUEST, LOGICAL UNIT NOT SUPPORTED.
    pub const LUN_NOT_SUPPORTED: Sense = Sense::new(0x05, 0x25, 0x00);
    /// ILLEGAL REQUEST, SAVING PARAMETERS NOT SUPPORTED.
    pub const SAVING_NOT_SUPPORTED: Sense = Sense::new(0x05, 0x39, 0x00);
    /// DATA PROTECT, WRITE PROTECTED.
    pub const WRITE_PROTECTED: Sense = Sense::new(0x07, 0x27, 0x00);
    /// DATA PROTECT, SPACE ALLOCATION FAILED WRITE PROTECT.
    pub const SPACE_ALLOCATION_FAILED: Sense = Sense::new(0x07, 0x27, 0x07);
    /// MEDIUM ERROR, UNRECOVERED READ ERROR.
    pub const UNRECOVERED_READ_ERROR: Sense = Sense::new(0x03, 0x11, 0x00);
    /// MEDIUM ERROR, WRITE ERROR.
    pub const WRITE_ERROR: Sense = Sense::new(0x03, 0x0c, 0x00);
    /// ABORTED COMMAND, DATA PHASE ERROR (bad Data-Out sequencing).
    pub const DATA_PHASE_ERROR: Sense = Sense::new(0x0b, 0x4b, 0x00);
    /// UNIT ATTENTION, REPORTED LUNS DATA HAS CHANGED: the LUNs the
    /// initiator sees were mapped or unmapped.
    pub const REPORTED_LUNS_DATA_CHANGED: Sense = Sense::new(0x06, 0x3f, 0x0e);
    /// ILLEGAL REQUEST, INVALID RELEASE OF PERSISTENT RESERVATION (a
    /// RELEASE naming another type than the one held).
    pub const INVALID_RELEASE: Sense = Sense::new(0x05, 0x26, 0x04);
    /// ILLEGAL REQUEST, INSUFFICIENT REGISTRATION RESOURCES.
    pub const INSUFFICIENT_REGISTRATION_RESOURCES: Sense = Sense::new(0x05, 0x55, 0x04);
    /// MISCOMPARE, MISCOMPARE DURING VERIFY OPERATION, without the offset.
    pub const MISCOMPARE: Sense = Sense::new(0x0e, 0x1d, 0x00);
    /// UNIT ATTENTION, BUS DEVICE RESET FUNCTION OCCURRED: the LUN was
    /// reset (by a LOGICAL UNIT RESET through any session).
    pub const LUN_RESET_OCCURRED: Sense = Sense::new(0x06, 0x29, 0x03);
    /// NOT READY, LOGICAL UNIT NOT READY, MANUAL INTERVENTION REQUIRED:
    /// the administrator took the LUN offline.
    pub const LOGICAL_UNIT_NOT_READY: Sense = Sense::new(0x02, 0x04, 0x03);
    /// HARDWARE ERROR, INTERNAL TARGET FAILURE: the engine refused a
    /// request for a reason no other sense names.
    pub const INTERNAL_TARGET_FAILURE: Sense = Sense::new(0x04, 0x44, 0x00);

    /// A sense of `key`, `asc` and `ascq`.
    pub const fn new(key: u8, asc: u8, ascq: u8) -> Sense {
        Sense {
            key,
            asc,
            ascq,
            information: None,
        }
    }

    /// A miscompare found `offset` bytes into the data compared.
    pub fn miscompare_at(offset: u32) -> Sense {
        Sense {
            information: Some(offset),
            ..Sense::MISCOMPARE
        }
    }

    /// Fixed-format sense data: 18 bytes.
    pub fn fixed(&self) -> [u8; 18] {
        let mut data = [0u8; 18];
        data[0] = 0x70;
        if let Some(information) = self.information {
            data[0] |= 0x80; // VALID
            data[3..7].copy_from_slice(&information.to_be_bytes());
        }
        data[2] = self.key;
        data[7] = 10;
        data[12] = self.asc;
        data[13] = self.ascq;
        data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_sense_places_key_and_codes() {
        let data = Sense::LBA_OUT_OF_RANGE.fixed();
        assert_eq!(data[0], 0x70);
        assert_eq!(data[2], 0x05);
        assert_eq!((data[12], data[13]), (0x21, 0x00));
        assert_eq!(usize::from(data[7]) + 8, data.len());
        assert_eq!(data[0] & 0x80, 0, "no INFORMATION, not VALID");
    }

    #[test]
    fn miscompare_carries_its_offset() {
        let data = Sense::miscompare_at(0x1234).fixed();
        assert_eq!(data[0], 0xf0);
        assert_eq!(data[2], 0x0e);
        assert_eq!(&data[3..7], &[0, 0, 0x12, 0x34]);
        assert_eq!((data[12], data[13]), (0x1d, 0x00));
    }
}
