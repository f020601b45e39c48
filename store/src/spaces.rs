//! Registered Spaces.

use rusqlite::{params, OptionalExtension};
use spaces_sdk::{Approvals, SpaceNetwork, SpaceRecord};

use super::{now_ms, Store};
use crate::error::Result;

impl Store {
    /// Insert or replace the Space `name`.
    pub fn space_put(&self, space: &SpaceRecord) -> Result<()> {
        let space = space.clone();
        self.write(move |conn| {
            conn.execute(
                "INSERT INTO spaces (name, root, read_only, approvals, network, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT(name) DO UPDATE SET root = excluded.root, read_only = excluded.read_only,
             approvals = excluded.approvals, network = excluded.network",
                params![space.name, space.root, space.read_only, space.approvals.as_str(), space.network.as_str(), now_ms() as i64],
            )?;
            Ok(())
        })
    }

    /// Unregister the Space `name`; false when it was not registered.
    pub fn space_delete(&self, name: &str) -> Result<bool> {
        let name = name.to_owned();
        self.write(move |conn| Ok(conn.execute("DELETE FROM spaces WHERE name = ?1", params![name])? > 0))
    }

    /// The Space `name`, if registered.
    pub fn space_get(&self, name: &str) -> Result<Option<SpaceRecord>> {
        Ok(self
            .reader()?
            .prepare_cached("SELECT name, root, read_only, approvals, network FROM spaces WHERE name = ?1")?
            .query_row(params![name], space_row)
            .optional()?)
    }

    /// Every Space, by name.
    pub fn space_list(&self) -> Result<Vec<SpaceRecord>> {
        let conn = self.reader()?;
        let mut stmt = conn.prepare("SELECT name, root, read_only, approvals, network FROM spaces ORDER BY name")?;
        let rows = stmt.query_map([], space_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}

/// A `spaces` row (`name, root, read_only, approvals, network`) as a record. A `network` other
/// than `enabled` reads as `none`: an unknown word never opens the network.
fn space_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SpaceRecord> {
    let approvals: String = r.get(3)?;
    let network: String = r.get(4)?;
    Ok(SpaceRecord {
        name: r.get(0)?,
        root: r.get(1)?,
        read_only: r.get(2)?,
        approvals: if approvals == "confirm" { Approvals::Confirm } else { Approvals::Off },
        network: if network == "enabled" { SpaceNetwork::Enabled } else { SpaceNetwork::None },
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A state dir from before the network setting: its Spaces keep the network they had
    /// (`enabled`); a word this daemon does not know reads as `none`, never as open.
    #[test]
    fn a_space_registered_before_the_network_setting_keeps_the_network_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spaces.db");
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch(
                "CREATE TABLE spaces (name TEXT PRIMARY KEY, root TEXT NOT NULL, read_only INTEGER NOT NULL DEFAULT 0,
                 approvals TEXT NOT NULL DEFAULT 'off', created_ms INTEGER NOT NULL);
                 INSERT INTO spaces VALUES ('old', '/srv/old', 0, 'off', 1);",
            )
            .unwrap();
        let store = Store::open(&path).unwrap();
        assert_eq!(store.space_get("old").unwrap().unwrap().network, SpaceNetwork::Enabled);
        store.write(|conn| Ok(conn.execute("UPDATE spaces SET network = 'wide-open' WHERE name = 'old'", [])?)).unwrap();
        assert_eq!(store.space_get("old").unwrap().unwrap().network, SpaceNetwork::None);
    }
}
