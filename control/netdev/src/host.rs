//! The host as the data planes ask it about next hops, behind one trait so that code that
//! asks can be tested without a kernel: [`Kernel`] asks the real one (`links`,
//! `neighbor`); [`fake::FakeHost`] answers from a table.

use crate::neighbor::NeighborError;
use async_trait::async_trait;
use std::io;
use std::net::IpAddr;
use std::time::Duration;

#[async_trait]
pub trait Host: Send + Sync {
    /// The index of interface `name`.
    fn ifindex(&self, name: &str) -> io::Result<u32>;

    /// The MAC of next hop `addr` on `ifname` (`ifindex`), resolving it when the neighbor
    /// table has no usable entry, waiting at most `timeout`.
    async fn resolve(
        &self,
        ifname: &str,
        ifindex: u32,
        addr: IpAddr,
        timeout: Duration,
    ) -> Result<[u8; 6], NeighborError>;
}

/// This machine's kernel (in the caller's network namespace).
pub struct Kernel;

#[async_trait]
impl Host for Kernel {
    fn ifindex(&self, name: &str) -> io::Result<u32> {
        crate::links::ifindex(name)
    }

    async fn resolve(
        &self,
        ifname: &str,
        ifindex: u32,
        addr: IpAddr,
        timeout: Duration,
    ) -> Result<[u8; 6], NeighborError> {
        crate::neighbor::resolve(ifname, ifindex, addr, timeout).await
    }
}

pub mod fake {
    //! A host from a table, for tests: interfaces by name, neighbors by (interface,
    //! address); anything else is missing, as on a host without it.
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    #[derive(Default)]
    pub struct FakeHost {
        interfaces: BTreeMap<String, u32>,
        neighbors: BTreeMap<(u32, IpAddr), [u8; 6]>,
        /// Every resolve asked, in order (what the code under test asked of the host).
        pub asked: Mutex<Vec<(String, IpAddr)>>,
    }

    impl FakeHost {
        pub fn interface(mut self, name: &str, index: u32) -> FakeHost {
            self.interfaces.insert(name.to_string(), index);
            self
        }

        pub fn neighbor(mut self, ifindex: u32, addr: IpAddr, mac: [u8; 6]) -> FakeHost {
            self.neighbors.insert((ifindex, addr), mac);
            self
        }
    }

    #[async_trait]
    impl Host for FakeHost {
        fn ifindex(&self, name: &str) -> io::Result<u32> {
            self.interfaces
                .get(name)
                .copied()
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))
        }

        async fn resolve(
            &self,
            ifname: &str,
            ifindex: u32,
            addr: IpAddr,
            timeout: Duration,
        ) -> Result<[u8; 6], NeighborError> {
            if let Ok(mut a) = self.asked.lock() {
                a.push((ifname.to_string(), addr));
            }
            self.neighbors
                .get(&(ifindex, addr))
                .copied()
                .ok_or_else(|| NeighborError::Unresolved {
                    addr,
                    ifname: ifname.to_string(),
                    timeout,
                })
        }
    }
}
