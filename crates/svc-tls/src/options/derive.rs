//! The option sets in a clap-derive command (`#[command(flatten)]`): the marker
//! types that name a peer, and the option sets under such a name. The module docs
//! (`options/overview.md`, "clap derive") show them in a command.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

use clap::error::ErrorKind;
use clap::{ArgMatches, Args, Command, FromArgMatches};

use super::{ClientIdentityOptions, OptionsError, PeerOptions};

/// A peer service's name as a type, for [`PeerArgs`] and [`IdentityArgs`]: `NAME` is
/// the flag prefix, lowercase (`identity` gives `--identity-host`).
///
/// Implement it on a marker type, or declare one with [`peer_name!`](crate::peer_name).
pub trait PeerName: Send + Sync + 'static {
    /// The peer's name, as in its flags.
    const NAME: &'static str;
}

/// Declares a marker type naming a peer service, for [`PeerArgs`] and [`IdentityArgs`].
///
/// ```
/// use svc_tls::options::PeerArgs;
///
/// svc_tls::peer_name!(
///     /// The billing service (`--billing-host`, ...).
///     pub Billing = "billing"
/// );
///
/// let billing = PeerArgs::<Billing>::default();
/// assert_eq!(billing.service(), "billing");
/// ```
#[macro_export]
macro_rules! peer_name {
    ($(#[$meta:meta])* $vis:vis $marker:ident = $name:literal) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        $vis struct $marker;

        impl $crate::options::PeerName for $marker {
            const NAME: &'static str = $name;
        }
    };
}

/// The platform's peer services, as [`PeerName`] markers.
pub mod peers {
    crate::peer_name!(
        /// The identity service (`--identity-*`).
        pub Identity = "identity"
    );
    crate::peer_name!(
        /// The region service (`--region-*`).
        pub Region = "region"
    );
    crate::peer_name!(
        /// The kubernetes service (`--kubernetes-*`).
        pub Kubernetes = "kubernetes"
    );
    crate::peer_name!(
        /// The compute service (`--compute-*`).
        pub Compute = "compute"
    );
    crate::peer_name!(
        /// The audit collector (`--audit-*`).
        pub Audit = "audit"
    );
}

/// The options of peer `P` in a clap-derive command: the flags of
/// [`PeerOptions::augment`] under `P::NAME`, read as [`PeerOptions::from_matches`]
/// reads them. Derefs to the [`PeerOptions`]; [`PeerArgs::into_inner`] takes them.
/// `Default` is the peer with nothing set (not configured), as Go's zero value.
pub struct PeerArgs<P: PeerName> {
    options: PeerOptions,
    name: PhantomData<fn() -> P>,
}

impl<P: PeerName> PeerArgs<P> {
    /// The options read.
    pub fn into_inner(self) -> PeerOptions {
        self.options
    }

    /// The options read.
    pub fn options(&self) -> &PeerOptions {
        &self.options
    }
}

impl<P: PeerName> Default for PeerArgs<P> {
    fn default() -> Self {
        Self {
            options: PeerOptions::new(P::NAME),
            name: PhantomData,
        }
    }
}

impl<P: PeerName> Clone for PeerArgs<P> {
    fn clone(&self) -> Self {
        Self {
            options: self.options.clone(),
            name: PhantomData,
        }
    }
}

impl<P: PeerName> fmt::Debug for PeerArgs<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.options.fmt(f)
    }
}

impl<P: PeerName> PartialEq for PeerArgs<P> {
    fn eq(&self, other: &Self) -> bool {
        self.options == other.options
    }
}

impl<P: PeerName> Deref for PeerArgs<P> {
    type Target = PeerOptions;

    fn deref(&self) -> &PeerOptions {
        &self.options
    }
}

impl<P: PeerName> From<PeerArgs<P>> for PeerOptions {
    fn from(args: PeerArgs<P>) -> Self {
        args.options
    }
}

impl<P: PeerName> Args for PeerArgs<P> {
    fn augment_args(cmd: Command) -> Command {
        PeerOptions::augment(cmd, P::NAME)
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        PeerOptions::augment(cmd, P::NAME)
    }
}

impl<P: PeerName> FromArgMatches for PeerArgs<P> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(Self {
            options: PeerOptions::from_matches(matches, P::NAME).map_err(clap_error)?,
            name: PhantomData,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

/// The client identity presented to peer `P` in a clap-derive command:
/// `--P-client-certificate-*` and `--P-spiffe-server-id`, as
/// [`ClientIdentityOptions::augment`] with the prefix `P::NAME` (no reload interval:
/// Go never had a prefixed one). Derefs to the [`ClientIdentityOptions`].
/// `Default` is nothing set: no identity of its own.
pub struct IdentityArgs<P: PeerName> {
    options: ClientIdentityOptions,
    name: PhantomData<fn() -> P>,
}

impl<P: PeerName> IdentityArgs<P> {
    /// The options read.
    pub fn into_inner(self) -> ClientIdentityOptions {
        self.options
    }

    /// The options read.
    pub fn options(&self) -> &ClientIdentityOptions {
        &self.options
    }
}

impl<P: PeerName> Default for IdentityArgs<P> {
    fn default() -> Self {
        Self {
            options: ClientIdentityOptions::new(Some(P::NAME)),
            name: PhantomData,
        }
    }
}

impl<P: PeerName> Clone for IdentityArgs<P> {
    fn clone(&self) -> Self {
        Self {
            options: self.options.clone(),
            name: PhantomData,
        }
    }
}

impl<P: PeerName> fmt::Debug for IdentityArgs<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.options.fmt(f)
    }
}

impl<P: PeerName> PartialEq for IdentityArgs<P> {
    fn eq(&self, other: &Self) -> bool {
        self.options == other.options
    }
}

impl<P: PeerName> Deref for IdentityArgs<P> {
    type Target = ClientIdentityOptions;

    fn deref(&self) -> &ClientIdentityOptions {
        &self.options
    }
}

impl<P: PeerName> From<IdentityArgs<P>> for ClientIdentityOptions {
    fn from(args: IdentityArgs<P>) -> Self {
        args.options
    }
}

impl<P: PeerName> Args for IdentityArgs<P> {
    fn augment_args(cmd: Command) -> Command {
        ClientIdentityOptions::augment(cmd, Some(P::NAME))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        ClientIdentityOptions::augment(cmd, Some(P::NAME))
    }
}

impl<P: PeerName> FromArgMatches for IdentityArgs<P> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(Self {
            options: ClientIdentityOptions::from_matches(matches, Some(P::NAME))
                .map_err(clap_error)?,
            name: PhantomData,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

/// The unprefixed identity (`--client-certificate-*`, `--spiffe-server-id` and the
/// deprecated `--client-certificate-reload-interval`): the default set, which stays
/// unprefixed forever. Nothing set: no client certificate (Go's zero value).
impl Default for ClientIdentityOptions {
    fn default() -> Self {
        Self::new(None)
    }
}

/// `#[command(flatten)] me: ClientIdentityOptions` registers the unprefixed identity.
impl Args for ClientIdentityOptions {
    fn augment_args(cmd: Command) -> Command {
        Self::augment(cmd, None)
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment(cmd, None)
    }
}

impl FromArgMatches for ClientIdentityOptions {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Self::from_matches(matches, None).map_err(clap_error)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_matches(matches, None).map_err(clap_error)?;
        Ok(())
    }
}

/// An options error as clap reports a bad value (exit code 2, the message naming
/// the flag).
fn clap_error(error: OptionsError) -> clap::Error {
    let kind = match error {
        OptionsError::NotDefined { .. } => ErrorKind::UnknownArgument,
        OptionsError::SourceConflict { .. } | OptionsError::CaSourceConflict { .. } => {
            ErrorKind::ArgumentConflict
        }
        OptionsError::MissingSpiffeServerId { .. } | OptionsError::HalfSetReference { .. } => {
            ErrorKind::MissingRequiredArgument
        }
        _ => ErrorKind::ValueValidation,
    };
    clap::Error::raw(kind, format!("{error}\n"))
}
