"""factory_boy factories for the domain's main objects."""

import factory
from django.contrib.auth import get_user_model

from accounts.models import Account, Membership
from contacts.models import Contact


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.PostGenerationMethodCall("set_password", "correct-horse-battery")

    @factory.post_generation
    def _save(obj, create, extracted, **kwargs):
        if create:
            obj.save()


class AccountFactory(factory.django.DjangoModelFactory[Account]):
    class Meta:
        model = Account

    name = factory.Sequence(lambda n: f"Account {n}")
    slug = factory.Sequence(lambda n: f"account-{n}")


class MembershipFactory(factory.django.DjangoModelFactory[Membership]):
    class Meta:
        model = Membership

    account = factory.SubFactory(AccountFactory)
    user = factory.SubFactory(UserFactory)
    role = "owner"


class ContactFactory(factory.django.DjangoModelFactory[Contact]):
    class Meta:
        model = Contact

    account = factory.SubFactory(AccountFactory)
    email = factory.Sequence(lambda n: f"contact{n}@example.com")
    phone = factory.Sequence(lambda n: f"+1555000{n:04d}")
    first_name = "Ada"
    last_name = "Lovelace"
